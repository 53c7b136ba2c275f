#!/usr/bin/env bash
# All-features VFL and FedSDG-FS on MADELON: loopback deployment vs simulation, same config.
#
#   deploy/measure_madelon.sh WORK_DIR [DATA_DIR]      (from the repository root)
#
# Cuts MADELON (DATA_DIR/madelon.npz; default $VFLFS_DATA_DIR or ../shared/datasets) into two
# party files and a labels file, starts a TLS SuperLink with SuperNode authentication and one
# SuperNode per party (each reading its own file) on loopback ports, and runs every strategy
# twice on the same files and config: in Flower's simulation engine (vflfs-run) and over the
# deployment (vflfs submit, with the parties' identity keys). Prints one line per run: wall time, test accuracy, round-trips, and
# whether the deployment's step losses equal the simulation's. Results land in WORK_DIR.
# FedSDG-FS follows a short regularisation path (FEDSDG_PATH: 2 penalties, 1 refit) for time:
# its default path (FEDSDG_PATH='') trains about 200 epochs on MADELON, about 200 deployment
# round-trips. Its warm-up stops at EPOCHS at the latest, its refit at 3 x EPOCHS.
# The learning rate is section 7's for MADELON (0.01): at 0.001 the first epochs of K = 13 stay
# at the uniform prediction, and the stalled-start watch restarts them at lower rates.
# Environment: PORT (SuperLink, default 9093; SuperNodes use PORT+7 and PORT+8), EPOCHS (20),
# STRATEGIES ("vfl fedsdg_fs"), FEDSDG_PATH (FedSDG-FS's path settings).
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 WORK_DIR [DATA_DIR]" >&2
  exit 2
fi
work=$(realpath -m "$1")
data_dir=$(realpath -m "${2:-${VFLFS_DATA_DIR:-$PWD/../shared/datasets}}")
port=${PORT:-9093}
export FLWR_HOME=$work/flwr-home VFLFS_CACHE_DIR=$work/cache
export FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1
mkdir -p "$work" "$FLWR_HOME"

common="model=mlp training.batch_size=128 training.lr=0.01 training.local_steps=100"
common="$common training.epochs=${EPOCHS:-20} training.patience=null device=cpu seed=0"
short_path="strategy.path.points=2 strategy.path.max_points=2 strategy.path.refit_candidates=1"
short_path="$short_path strategy.path.refit_probes=0"
declare -A strategies=(
  [vfl]="strategy=vfl"
  [fedsdg_fs]="strategy=fedsdg_fs ${FEDSDG_PATH-$short_path}"
)

vflfs split "$work/data" --format npz dataset=madelon dataset.data_dir="$data_dir" \
  split=random split.num_parties=2 >"$work/split.txt"
deploy/make_certs.sh "$work/tls" 2 >/dev/null
[ -f "$work/identity/party_1.key" ] || vflfs keygen "$work/identity/party_0" "$work/identity/party_1" >/dev/null

cleanup() { kill $(jobs -p) 2>/dev/null || true; }
trap cleanup EXIT
flower-superlink --port "$port" \
  --ssl-ca-certfile "$work/tls/certs/ca.crt" --ssl-certfile "$work/tls/certs/server.pem" \
  --ssl-keyfile "$work/tls/certs/server.key" \
  --enable-supernode-auth --disable-runtime-dependency-installation >"$work/superlink.log" 2>&1 &
until curl -sf --cacert "$work/tls/certs/ca.crt" "https://127.0.0.1:$port/health"; do sleep 1; done
cat >"$FLWR_HOME/config.toml" <<EOF
[superlink]
default = "vfl"

[superlink.vfl]
address = "127.0.0.1:$port"
root-certificates = "$work/tls/certs/ca.crt"
EOF
for i in 0 1; do
  flwr supernode register "$work/tls/keys/supernode_$i.pub" vfl >/dev/null
  flower-supernode --superlink "127.0.0.1:$port" --port $((port + 7 + i)) \
    --root-certificates "$work/tls/certs/ca.crt" \
    --auth-supernode-private-key "$work/tls/keys/supernode_$i" \
    --node-config "partition-id=$i num-partitions=2 data-path='$work/data/party_$i.npz' id-column='id' identity-key='$work/identity/party_$i.key'" \
    >"$work/supernode_$i.log" 2>&1 &
done

summary() { # engine strategy wall_s results_folder
  python - "$@" <<'EOF'
import json, sys
engine, strategy, wall, folder = sys.argv[1:5]
r = json.load(open(f"{folder}/results.json"))
rts = sum(p["round_trips"] for p in r["communication"]["phases"].values())
print(f"{strategy:10s} {engine:10s} wall {float(wall):6.1f} s  run {r['wall_time_s']['total']:6.1f} s"
      f"  round-trips {rts:3d}  epochs {r['epochs_run']:3d}  test {r['test_metric']:.4f}"
      f"  val {r['val_metric']:.4f}  best epoch {r['best_epoch']:2d}"
      f"  selected {r['selection']['ratio']:.3f}", flush=True)
EOF
}

for s in ${STRATEGIES:-vfl fedsdg_fs}; do
  server="dataset=party_files dataset.labels_path=$work/data/labels.npz split.num_parties=2"
  server="$server $common ${strategies[$s]}"
  SECONDS=0
  vflfs-run engine=simulation $server "dataset.party_paths=[$work/data/party_0.npz,$work/data/party_1.npz]" \
    output_dir="$work/simulation/$s" hydra.run.dir="$work/hydra/$s" >"$work/simulation-$s.log" 2>&1
  summary simulation "$s" "$SECONDS" "$work/simulation/$s"

  SECONDS=0
  keys="federation.party_keys=[$work/identity/party_0.pub,$work/identity/party_1.pub]"
  # exits non-zero (and stops the script) if the run fails; on a loaded machine a `flwr ls` can
  # take a minute, so the SuperLink counts as lost only after LOST_AFTER seconds (600)
  vflfs submit --lost-after "${LOST_AFTER:-600}" . vfl \
    -c "hydra-overrides='$server $keys' output-dir='$work/deployment/$s'" \
    >"$work/deployment-$s.log" 2>&1
  summary deployment "$s" "$SECONDS" "$work/deployment/$s"
  python - "$work/simulation/$s" "$work/deployment/$s" <<'EOF'
import json, sys
a, b = (json.load(open(f"{d}/results.json")) for d in sys.argv[1:3])
for r in (a, b):  # a path point's MB differs: the deployment also checks the parties' keys
    r["path"] = [{k: v for k, v in p.items() if k != "mb"} for p in r.get("path", [])]
keys = ("step_losses", "test_metric", "final_test_metric", "selection", "path")
same = {k: a[k] == b[k] for k in keys}
print(f"{'':10s} deployment == simulation (every step loss, test accuracies, selection, path): "
      f"{all(same.values())}" + ("" if all(same.values()) else f" {same}"), flush=True)
EOF
done
