#!/usr/bin/env bash
# Installs what the build and the test suite need when it is missing: Debian's RocksDB,
# libclang and Snappy (the raft crate links the system librocksdb; see .cargo/config.toml),
# redis-tools and redis-server (redis-cli for CLI tests, redis-server as the side-by-side
# peer) and the Python clients (redis-py, pytest). Safe to run repeatedly; does nothing when
# all is there. `deps.sh build` installs only what building needs (the apt libraries), for
# `make run`.
set -euo pipefail
only_build=0
[ "${1:-}" = build ] && only_build=1

need_apt=()
# raft/: rocksdb's bindgen needs libclang; the crate links Debian's librocksdb (never builds it).
for pkg in librocksdb-dev libclang-dev libsnappy-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need_apt+=("$pkg")
done
if [ $only_build -eq 0 ]; then
    command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
    command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
    # Debian starts a redis-server service on install; the tests start their own.
    $SUDO systemctl stop redis-server >/dev/null 2>&1 || $SUDO service redis-server stop >/dev/null 2>&1 || true
fi

[ $only_build -eq 1 ] && exit 0

# rq: the job-queue library of the end-to-end test (tests/python/test_jobqueue.py).
# redis-py >= 6 has the vector-set helpers r.vset() (tests/python/test_vector.py); numpy and
# usearch are for benches/vector.py (the in-process library it compares against).
if ! python3 -c 'import redis, pytest, rq, numpy, usearch; from redis.commands.vectorset import VectorSetCommands' >/dev/null 2>&1; then
    python3 -m pip install -q --upgrade --disable-pip-version-check redis pytest rq numpy usearch 2>&1 | grep -v 'Running pip as the' || true
fi
