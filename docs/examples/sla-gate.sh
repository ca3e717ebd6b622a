#!/usr/bin/env bash
# Gate on the memory's latency SLAs: run `memharness load --target` against a service and
# pass its exit code on (0 every SLA held; 1 turns failed; 3 an SLA broken; 4 the
# consistency check failed: docs/load.md). Used by github-actions-sla.yml and by
# tests/test_sla_gate_example.py.
#
#   sla-gate.sh reference      start `memharness serve` here (a throwaway key and sealing
#                              key) and gate on it
#   sla-gate.sh URL            gate on your own service at URL; MEMH_API_KEY is its key
#
# SLA_USERS, SLA_DURATION and SLA_LIMITS (op=ms,..., default: the built-in SLAs) tune it;
# MEMH_BACKEND, MEMH_EMBEDDER and MEMH_DATA_DIR choose the reference's stores as anywhere.
set -euo pipefail
target=${1:?usage: sla-gate.sh reference | URL}
memharness=${MEMHARNESS:-memharness}
users=${SLA_USERS:-10}
duration=${SLA_DURATION:-60s}
limits=()
if [ -n "${SLA_LIMITS:-}" ]; then limits=(--sla "$SLA_LIMITS"); fi

if [ "$target" = reference ]; then
  port=${SLA_PORT:-18080}
  data=${MEMH_DATA_DIR:-$(mktemp -d)}
  export MEMH_ENCRYPTION_KEY=${MEMH_ENCRYPTION_KEY:-$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')}
  export MEMH_API_KEY
  MEMH_API_KEY=$("$memharness" serve keys add --tenant ci --data-dir "$data")
  "$memharness" serve --port "$port" --data-dir "$data" &
  server=$!
  trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
  for _ in $(seq 120); do
    curl -s -o /dev/null "http://127.0.0.1:$port/v1/health" && break
    kill -0 "$server" || { echo "sla-gate: the service exited before it answered" >&2; exit 2; }
    sleep 1
  done
  target=http://127.0.0.1:$port
fi

set +e
"$memharness" load --target "$target" --users "$users" --duration "$duration" "${limits[@]}"
code=$?
set -e
case $code in
  0) echo "sla-gate: every SLA held at $target" ;;
  3) echo "sla-gate: an SLA is broken at $target (see above)" >&2 ;;
  *) echo "sla-gate: load exited $code at $target (docs/load.md, exit codes)" >&2 ;;
esac
exit "$code"
