#!/usr/bin/env bash
# The parties' entrance to a SuperLink: nginx serving only Flower's Fleet API over TLS.
#
#   deploy/fleet_proxy.sh WORK_DIR [--listen HOST:PORT] [--superlink HOST:PORT]
#                         [--tls DIR | --cert FILE --key FILE --ca FILE]
#                         [--superlink-name NAME] [--check]
#
# Flower 1.42's SuperLink serves its Fleet (/v1/fleet/...), Control (/v1/control/...) and
# Runtime APIs on one port: whoever reaches it can submit runs. Start the SuperLink on the
# loopback interface (its default `--host 127.0.0.1`) and this proxy on the address the parties
# reach. It forwards POST /v1/fleet/<call> to the SuperLink over TLS, verified with the CA, and
# answers 403 to everything else (Control, Runtime, /health, other methods). SuperNode
# authentication passes through: a SuperNode signs its requests' headers, which the proxy
# forwards unchanged.
#
#   --listen HOST:PORT      where the parties connect (default 0.0.0.0:9092)
#   --superlink HOST:PORT   the SuperLink, on this machine (default 127.0.0.1:9093)
#   --tls DIR               what deploy/make_certs.sh wrote in DIR: certs/server.pem and
#                           certs/server.key (the parties see this certificate) and certs/ca.crt
#                           (verifies the SuperLink); or give --cert, --key and --ca
#   --superlink-name NAME   the name the SuperLink's certificate is checked against
#                           (default localhost, one of make_certs.sh's names)
#   --check                 write the configuration, test it (nginx -t) and exit
#
# Writes WORK_DIR/nginx.conf and runs nginx in the foreground (stop it with SIGTERM or SIGQUIT);
# logs: WORK_DIR/access.log (every request with its status) and standard error. Needs nginx
# (Debian/Ubuntu: apt-get install nginx); run it as an unprivileged user (as root, nginx's
# workers run as nobody). docs/deployment.md, section 10, has the whole setup.
set -euo pipefail

usage() {
  sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
work=$1
shift
listen=0.0.0.0:9092
superlink=127.0.0.1:9093
superlink_name=localhost
cert='' key='' ca='' check=0
while [ $# -gt 0 ]; do
  case $1 in
    --listen) listen=${2:?--listen needs HOST:PORT}; shift 2 ;;
    --superlink) superlink=${2:?--superlink needs HOST:PORT}; shift 2 ;;
    --superlink-name) superlink_name=${2:?--superlink-name needs a name}; shift 2 ;;
    --tls)
      dir=${2:?--tls needs the folder make_certs.sh wrote}
      cert=$dir/certs/server.pem key=$dir/certs/server.key ca=$dir/certs/ca.crt
      shift 2 ;;
    --cert) cert=${2:?--cert needs a file}; shift 2 ;;
    --key) key=${2:?--key needs a file}; shift 2 ;;
    --ca) ca=${2:?--ca needs a file}; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done

for pair in "--cert:$cert" "--key:$key" "--ca:$ca"; do
  file=${pair#*:}
  if [ -z "$file" ] || [ ! -r "$file" ]; then
    echo "${pair%%:*} '$file' is not a readable file; fix: give --tls DIR (deploy/make_certs.sh's" \
      "folder) or --cert, --key and --ca" >&2
    exit 2
  fi
done
if ! command -v nginx >/dev/null; then
  echo "nginx not found; install it (Debian/Ubuntu: apt-get install nginx) and retry" >&2
  exit 1
fi
case $superlink in
  127.* | localhost:* | '[::1]':*) ;;
  *) echo "warning: the SuperLink at $superlink is not on loopback; its Control API must not" \
    "be reachable by the parties" >&2 ;;
esac

mkdir -p "$work/tmp"
work=$(cd "$work" && pwd)
abs() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
cert=$(abs "$cert") key=$(abs "$key") ca=$(abs "$ca")

cat >"$work/nginx.conf" <<EOF
# Written by deploy/fleet_proxy.sh: only Flower's Fleet API, over TLS, to the SuperLink.
worker_processes 1;
pid $work/nginx.pid;
events { worker_connections 1024; }

http {
    access_log $work/access.log;
    server_tokens off;
    client_body_temp_path $work/tmp/body;
    proxy_temp_path $work/tmp/proxy;
    fastcgi_temp_path $work/tmp/fastcgi;
    uwsgi_temp_path $work/tmp/uwsgi;
    scgi_temp_path $work/tmp/scgi;

    upstream superlink {
        server $superlink;
        # Reused connections, closed before the SuperLink's server (uvicorn, 5 s) closes them.
        keepalive 8;
        keepalive_timeout 4s;
    }

    server {
        listen $listen ssl;
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.2 TLSv1.3;

        # The Fleet API's calls (register-node, pull-messages, push-object, ...): POST only.
        # nginx matches the normalised path, so /v1/fleet/../control/... does not match.
        location ~ ^/v1/fleet/[a-z][a-z-]*$ {
            limit_except POST { deny all; }
            proxy_pass https://superlink;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $ca;
            proxy_ssl_name $superlink_name;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
            # As the SuperLink itself: no body size limit (arrays travel in 5 MB chunks), and
            # bodies stream through rather than being buffered to disk.
            client_max_body_size 0;
            proxy_request_buffering off;
            proxy_buffering off;
        }

        # Control (runs, node registration), Runtime and everything else: not for the parties.
        location / {
            return 403;
        }
    }
}
EOF

if [ "$check" = 1 ]; then
  exec nginx -e stderr -p "$work" -c "$work/nginx.conf" -t
fi
echo "fleet proxy: https://$listen/v1/fleet/ -> https://$superlink (config $work/nginx.conf)" >&2
exec nginx -e stderr -p "$work" -c "$work/nginx.conf" -g 'daemon off;'
