#!/usr/bin/env python3
"""One long list, side by side: RPUSH 1,000 short elements a call until the list holds
`--elements`, then report the per-call latency (p50, p99.9, max) and used_memory, for
Ember and redis-server one after the other.

A list that grows by doubling one buffer copies the whole buffer under its lock now and
then; this shows those stalls and the memory held by the slack.

    python3 benches/long_list.py [--elements 9000000] [--ember BIN] [--redis BIN]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int) -> subprocess.Popen:
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit(f"server did not start: {argv}")


def measure(port: int, elements: int) -> dict:
    r = redis.Redis(port=port)
    r.delete("big")
    base = r.info("memory")["used_memory"]
    vals = [b"v%d" % i for i in range(1000)]
    times = []
    total = 0
    while total < elements:
        t = time.perf_counter()
        r.rpush("big", *vals)
        times.append(time.perf_counter() - t)
        total += len(vals)
    times.sort()
    return {
        "len": r.llen("big"),
        "p50_us": times[len(times) // 2] * 1e6,
        "p999_us": times[int(len(times) * 0.999)] * 1e6,
        "max_ms": times[-1] * 1e3,
        "bytes_per_elem": (r.info("memory")["used_memory"] - base) / total,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=int, default=9_000_000)
    p.add_argument("--ember", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "ember"))
    p.add_argument("--redis", default="redis-server")
    o = p.parse_args()
    print("| server | elements | RPUSH p50 us | p99.9 us | max ms | used_memory B/element |")
    print("|---|---|---|---|---|---|")
    for name, exe in (("ember", o.ember), ("redis", o.redis)):
        port = free_port()
        wd = tempfile.mkdtemp(prefix="long-list-")
        argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", wd]
        srv = start(argv, port)
        try:
            m = measure(port, o.elements)
        finally:
            srv.terminate()
            srv.wait(timeout=10)
        print(f"| {name} | {m['len']:,} | {m['p50_us']:.0f} | {m['p999_us']:.0f} | "
              f"{m['max_ms']:.1f} | {m['bytes_per_elem']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
