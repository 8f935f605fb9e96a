#!/usr/bin/env bash
# Redis's own test suite (tag 7.0.15, external-server mode) against Ember or, with
# SERVER=redis, Debian's redis-server: `make suite` / `make suite-stock`.
#
# Brings the suite's tree itself: Debian's source package of redis 7.0.15 (the version
# of Debian 12's redis-server) from the Debian mirror apt already uses, extracted to
# SUITE_DIR (default /tmp/redis-7.0.15; kept for later runs). Then runs every default unit
# (or UNITS="unit/multi unit/slowlog") one at a time on a fresh server, and prints the
# per-unit and per-family tables. Results: OUT (default /tmp/suite-<server>), whose
# summary.tsv goes next to stock's in benches/results/ when it is worth keeping.
#
# env: SERVER (ember|redis), SUITE_DIR, OUT, PORT (7777; 7778 for redis), EMBER_BIN,
#      UNITS, and run_suite.sh's own knobs (IDLE_TIMEOUT, UNIT_TIMEOUT, EXTRA_FLAGS ...).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SERVER=${SERVER:-ember}
SUITE_DIR=${SUITE_DIR:-/tmp/redis-7.0.15}
OUT=${OUT:-/tmp/suite-$SERVER}
export SUITE_DIR

need() { command -v "$1" >/dev/null 2>&1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! need tclsh || ! need redis-cli || ! need redis-server || ! need redis-benchmark; then
    as_root apt-get install -y tcl redis-tools redis-server >/dev/null
fi

if [ ! -x "$SUITE_DIR/runtest" ]; then
    # A private sources list with deb-src lines for the mirror the machine already uses,
    # so the system's apt configuration is left alone.
    work=$(mktemp -d /tmp/redis-src.XXXXXX)
    mkdir -p "$work/lists/partial" "$work/parts"
    : >"$work/sources.list"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" >"$work/parts/$(basename "$f")"
    done
    if [ -f /etc/apt/sources.list ]; then
        grep -h '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' >"$work/sources.list" || true
    fi
    opts=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts="$work/parts"
          -o Dir::State::Lists="$work/lists")
    as_root apt-get "${opts[@]}" update >/dev/null
    (cd "$work" && as_root apt-get "${opts[@]}" source --download-only redis >/dev/null)
    tarball=$(ls "$work"/redis_7.0.15.orig.tar.gz 2>/dev/null || true)
    if [ -z "$tarball" ]; then
        echo "suite.sh: Debian's redis source is not 7.0.15 here:" "$work"/redis_*.orig.tar.* >&2
        exit 1
    fi
    mkdir -p "$SUITE_DIR"
    tar -xzf "$tarball" -C "$SUITE_DIR" --strip-components=1
    rm -rf "$work"
fi
mkdir -p "$SUITE_DIR/src"
ln -sf "$(command -v redis-cli)" "$SUITE_DIR/src/redis-cli"
ln -sf "$(command -v redis-benchmark)" "$SUITE_DIR/src/redis-benchmark"

if [ "$SERVER" = redis ]; then
    PORT=${PORT:-7778}
    bin=$(command -v redis-server)
    EXTRA_FLAGS="${EXTRA_FLAGS:-} --baseport 25111"
    export EXTRA_FLAGS
else
    PORT=${PORT:-7777}
    bin=${EMBER_BIN:-}
    if [ -z "$bin" ]; then
        (cd "$root" && cargo build -p ember-node)
        bin=${CARGO_TARGET_DIR:-$root/target}/debug/ember
    fi
fi
S="$here/redis-suite"
export PRE_UNIT_CMD="$S/restart_server.sh $PORT $bin"
export RESTART_CMD="$S/restart_server.sh $PORT $bin"
status=0
bash "$S/run_suite.sh" 127.0.0.1 "$PORT" "$OUT" || status=$?
if [ -f "/tmp/redis-suite-$PORT/pid" ]; then kill "$(cat "/tmp/redis-suite-$PORT/pid")" 2>/dev/null || true; fi
bash "$S/families.sh" "$OUT/summary.tsv"
exit $status
