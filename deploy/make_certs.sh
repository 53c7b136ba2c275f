#!/usr/bin/env bash
# Test certificates and keys for a vflfs deployment (TLS + SuperNode authentication).
#
#   deploy/make_certs.sh OUT_DIR NUM_PARTIES [HOST ...]
#
# Writes into OUT_DIR:
#   certs/ca.crt, certs/ca.key         a test certificate authority (RSA 4096, 365 days)
#   certs/server.pem, certs/server.key the SuperLink's certificate, signed by the CA, with
#                                      subjectAltNames 127.0.0.1, ::1, localhost and every HOST
#                                      given (an IP address or a DNS name)
#   keys/supernode_<i>, .pub           one ECDSA P-384 key pair per party (SSH format), for
#                                      `flwr supernode register` and `flower-supernode
#                                      --auth-supernode-private-key`
# For tests and trials only: a real federation uses certificates from its own CA and lets each
# party make its key pair on its own machine (only the .pub file travels to the SuperLink's
# operator). Existing files are left as they are, so re-running is safe.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 OUT_DIR NUM_PARTIES [HOST ...]" >&2
  exit 2
fi
out=$1
parties=$2
shift 2
case $parties in
  '' | *[!0-9]*) echo "NUM_PARTIES must be a number, got '$parties'" >&2; exit 2 ;;
esac

mkdir -p "$out/certs" "$out/keys"
certs=$out/certs
keys=$out/keys

san="IP:127.0.0.1,IP:::1,DNS:localhost"
for host in "$@"; do
  if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
    san="$san,IP:$host"
  else
    san="$san,DNS:$host"
  fi
done

if [ ! -f "$certs/ca.crt" ]; then
  openssl genrsa -out "$certs/ca.key" 4096 2>/dev/null
  openssl req -new -x509 -key "$certs/ca.key" -sha256 -subj "/CN=vflfs test CA" \
    -days 365 -out "$certs/ca.crt"
fi

if [ ! -f "$certs/server.pem" ]; then
  openssl genrsa -out "$certs/server.key" 4096 2>/dev/null
  openssl req -new -key "$certs/server.key" -subj "/CN=vflfs SuperLink" -out "$certs/server.csr"
  printf "subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" \
    "$san" >"$certs/server.ext"
  openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -out "$certs/server.pem" -days 365 -sha256 -extfile "$certs/server.ext" \
    2>/dev/null
  rm -f "$certs/server.csr"
fi

for ((i = 0; i < parties; i++)); do
  if [ ! -f "$keys/supernode_$i" ]; then
    ssh-keygen -q -t ecdsa -b 384 -N "" -C "vflfs party $i" -f "$keys/supernode_$i"
  fi
done
chmod 600 "$certs/ca.key" "$certs/server.key" "$keys"/supernode_*[0-9]

echo "certificates in $certs (SANs: $san); SuperNode keys in $keys"
