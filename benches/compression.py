#!/usr/bin/env python3
"""Value compression benchmark: memory per value and SET/GET throughput, compression off/on.

Starts the ember binary given by --ember twice (`--compression no`, then `--compression yes`),
and for each writes N distinct values of --size bytes, once JSON-like text (compressible) and
once random bytes (incompressible), with pipelined SETs; then reads them all back with
pipelined GETs (checking every reply). Reports, per case, `used_memory` growth per value,
INFO's compressed_values / compression_bytes_saved, and SET and GET ops/s, as a Markdown table.

Needs redis-py. See benches/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(ember: str, compression: str, threshold: int) -> tuple[subprocess.Popen, redis.Redis]:
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="ember-compression-bench-", suffix=".log",
                                      delete=False)
    proc = subprocess.Popen(
        [ember, "--port", str(port), "--bind", "127.0.0.1", "--compression", compression,
         "--compression-threshold", str(threshold)],
        stdout=log, stderr=subprocess.STDOUT)
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)
    deadline = time.monotonic() + 20
    while True:
        try:
            c.ping()
            return proc, c
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                sys.exit(f"ember did not start (log: {log.name})")
            time.sleep(0.05)


def json_values(n: int, size: int, seed: int) -> list[bytes]:
    """Distinct JSON-like documents of exactly `size` bytes."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "status", "active", "pending", "user",
             "order", "item", "price", "currency", "EUR", "created", "updated"]
    out = []
    for i in range(n):
        rows = []
        length = 0
        j = 0
        while length < size:
            row = json.dumps({
                "id": i * 1000 + j,
                "name": f"{rng.choice(words)}-{rng.randrange(10**6)}",
                "status": rng.choice(words),
                "price": round(rng.random() * 1000, 2),
                "tags": rng.sample(words, 3),
                "ts": 1_700_000_000 + rng.randrange(10**7),
            })
            rows.append(row)
            length += len(row) + 1
            j += 1
        out.append(("[" + ",".join(rows) + "]").encode()[:size])
    return out


def random_values(n: int, size: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(n)]


def used_memory(c: redis.Redis) -> int:
    return int(c.info("memory")["used_memory"])


def run_case(c: redis.Redis, values: list[bytes], pipeline: int) -> dict:
    c.flushall()
    time.sleep(0.2)
    before = used_memory(c)
    keys = [f"v:{i}" for i in range(len(values))]
    t0 = time.perf_counter()
    for s in range(0, len(values), pipeline):
        p = c.pipeline(transaction=False)
        for k, v in zip(keys[s:s + pipeline], values[s:s + pipeline]):
            p.set(k, v)
        p.execute()
    set_s = time.perf_counter() - t0
    after = used_memory(c)
    info = c.info("memory")
    t0 = time.perf_counter()
    bad = 0
    for s in range(0, len(values), pipeline):
        p = c.pipeline(transaction=False)
        for k in keys[s:s + pipeline]:
            p.get(k)
        got = p.execute()
        bad += sum(1 for a, b in zip(got, values[s:s + pipeline]) if a != b)
    get_s = time.perf_counter() - t0
    if bad:
        sys.exit(f"{bad} GET replies differ from the values written")
    return {
        "mem_per_value": (after - before) / len(values),
        "compressed": int(info.get("compressed_values", 0)),
        "saved": int(info.get("compression_bytes_saved", 0)),
        "set_ops": len(values) / set_s,
        "get_ops": len(values) / get_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ember", required=True, help="ember binary")
    ap.add_argument("-n", type=int, default=20_000, help="values per case [20000]")
    ap.add_argument("--size", type=int, default=4096, help="value size in bytes [4096]")
    ap.add_argument("--pipeline", type=int, default=100, help="commands per pipeline [100]")
    ap.add_argument("--threshold", type=int, default=512, help="compression-threshold [512]")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    print(f"generating {args.n} x {args.size} B values of each kind...", file=sys.stderr)
    data = {
        "json": json_values(args.n, args.size, args.seed),
        "random": random_values(args.n, args.size, args.seed),
    }
    rows = []
    for compression in ("no", "yes"):
        proc, c = start(args.ember, compression, args.threshold)
        try:
            for kind, values in data.items():
                r = run_case(c, values, args.pipeline)
                rows.append((compression, kind, r))
                print(f"done: compression {compression}, {kind}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    print(f"{args.n} values of {args.size} B, pipeline {args.pipeline}, "
          f"threshold {args.threshold}, ember {os.path.abspath(args.ember)}\n")
    print("| compression | data | used_memory / value (B) | compressed_values "
          "| bytes saved / value | SET ops/s | GET ops/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for compression, kind, r in rows:
        print(f"| {compression} | {kind} | {r['mem_per_value']:.0f} | {r['compressed']} "
              f"| {r['saved'] / args.n:.0f} | {r['set_ops']:.0f} | {r['get_ops']:.0f} |")


if __name__ == "__main__":
    main()
