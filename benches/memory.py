#!/usr/bin/env python3
"""Bytes per key: N string keys (`key:<i>` -> a 16-byte value by default, pipelined SETs) loaded
into Ember and into redis-server, one after the other, each a fresh process with nothing
else in it. Reports, per server, used_memory and RSS before and after the load, the growth
per key of each, and the Ember/Redis ratios, as a Markdown table; then MEMORY STATS's
`overhead.hashtable.main` (Ember: its key tables) and MEMORY USAGE of one key.

Needs redis-py. See benches/README.md ("Memory per key").
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str]) -> tuple[subprocess.Popen, redis.Redis, str]:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="ember-memory-bench-")
    proc = subprocess.Popen(argv + ["--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=300)
    deadline = time.monotonic() + 20
    while True:
        try:
            c.ping()
            return proc, c, workdir
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(name: str, argv: list[str], n: int, batch: int, size: int) -> dict:
    proc, c, workdir = start(argv)
    try:
        time.sleep(0.3)
        used0 = int(c.info("memory")["used_memory"])
        rss0 = rss(proc.pid)
        value = b"v" * size
        t0 = time.monotonic()
        for start_i in range(0, n, batch):
            p = c.pipeline(transaction=False)
            for i in range(start_i, min(n, start_i + batch)):
                p.set(f"key:{i}", value)
            p.execute()
        load_s = time.monotonic() - t0
        assert c.dbsize() == n, "every key stored"
        time.sleep(0.5)
        used1 = int(c.info("memory")["used_memory"])
        rss1 = rss(proc.pid)
        stats = c.memory_stats()
        table = stats.get("db.0", {}).get("overhead.hashtable.main", 0)
        usage = c.memory_usage("key:12345")
        return {
            "name": name, "used0": used0, "used1": used1, "rss0": rss0, "rss1": rss1,
            "per_key_used": (used1 - used0) / n, "per_key_rss": (rss1 - rss0) / n,
            "table": table, "usage": usage, "load_s": load_s,
        }
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def mib(b: float) -> str:
    return f"{b / (1 << 20):.1f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ember", default="/work/target/release/ember")
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--value-size", type=int, default=16, help="bytes per value [16]")
    a = ap.parse_args()
    rows = [
        measure("ember", [a.ember], a.keys, a.batch, a.value_size),
        measure("redis-server", [a.redis, "--appendonly", "no"], a.keys, a.batch, a.value_size),
    ]
    e, r = rows
    print(f"{a.keys:,} keys `key:<i>` -> {a.value_size}-byte string, pipelined {a.batch} per batch\n")
    print("| server | used_memory after | RSS after | bytes/key (used_memory) | "
          "bytes/key (RSS) | key-table overhead | MEMORY USAGE of one key | load s |")
    print("|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['name']} | {mib(x['used1'])} | {mib(x['rss1'])} | {x['per_key_used']:.1f} | "
              f"{x['per_key_rss']:.1f} | {mib(x['table'])} | {x['usage']} | {x['load_s']:.1f} |")
    print(f"| ratio ember/redis | {e['used1'] / r['used1']:.2f} | {e['rss1'] / r['rss1']:.2f} | "
          f"{e['per_key_used'] / r['per_key_used']:.2f} | {e['per_key_rss'] / r['per_key_rss']:.2f} "
          f"| | | |")


if __name__ == "__main__":
    main()
