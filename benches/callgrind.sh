#!/usr/bin/env bash
# Instructions per command, counted by callgrind (deterministic, unlike wall-clock figures
# on a shared machine). Runs the server under `valgrind --tool=callgrind` with
# instrumentation off, prefills it, switches instrumentation on, sends exactly N requests
# of one command with ember-load (1 client, pipeline 30 unless told), dumps the counts
# and prints instructions per request. Only the server is counted, one file per thread:
# `Ir/cmd` counts the threads that serve connections (ember's workers, redis's main thread),
# `all/cmd` every thread, with the timer-driven ones (expiry, stats sampling), whose share
# grows with how slow the run is under valgrind rather than with the number of commands.
#
# usage: benches/callgrind.sh ember|redis COMMAND [N] [KEYSPACE]
#   env: EMBER (ember binary), LOAD (ember-load binary), PORT (17500), CLIENTS (1),
#        PIPELINE (30), OUTDIR (a fresh temporary folder; the callgrind files stay there),
#        EMBER_ARGS (extra ember arguments), CG_OPTS (extra callgrind options,
#        e.g. --cache-sim=yes --branch-sim=yes)
# example: benches/callgrind.sh ember GET 30000 100000
set -euo pipefail
server=${1:?ember or redis}
cmd=${2:?command}
n=${3:-30000}
keys=${4:-100000}
target=${CARGO_TARGET_DIR:-target}
EMBER=${EMBER:-$target/release/ember}
LOAD=${LOAD:-$target/release/ember-load}
PORT=${PORT:-17500}
CLIENTS=${CLIENTS:-1}
PIPELINE=${PIPELINE:-30}
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/callgrind.XXXXXX)}
mkdir -p "$OUTDIR"

case $server in
ember) argv=("$EMBER" --port "$PORT" --save '' --appendonly no ${EMBER_ARGS:-}) ;;
redis) argv=(redis-server --port "$PORT" --save '' --appendonly no --io-threads 1) ;;
*) echo "first argument: ember or redis" >&2; exit 2 ;;
esac

valgrind --tool=callgrind ${CG_OPTS:-} --instr-atstart=no --separate-threads=yes --callgrind-out-file="$OUTDIR/cg.out.%p" \
    "${argv[@]}" >"$OUTDIR/server.log" 2>&1 &
vpid=$!
trap 'kill $vpid 2>/dev/null || true; wait $vpid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
    if redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; then break; fi
    sleep 0.2
done
"$LOAD" --port "$PORT" --keyspace "$keys" --prefill "$keys" --duration 0 --cleanup >/dev/null
callgrind_control -i on "$vpid" >/dev/null
"$LOAD" --port "$PORT" --keyspace "$keys" --clients "$CLIENTS" --pipeline "$PIPELINE" \
    --command "$cmd" --requests "$n" --json >"$OUTDIR/load.json"
callgrind_control -d "$vpid" >/dev/null
kill "$vpid"
wait "$vpid" 2>/dev/null || true
trap - EXIT
total=0
work=0
for f in "$OUTDIR"/cg.out.*.1-*; do
    ir=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
    total=$((total + ir))
    if grep -q -E 'node::conn::|aeMain' "$f"; then work=$((work + ir)); fi
done
# ember-load sends one probe request before the measured ones.
echo "$server $cmd n=$n keys=$keys clients=$CLIENTS pipeline=$PIPELINE Ir/cmd=$((work / (n + 1))) all/cmd=$((total / (n + 1))) files=$OUTDIR"
