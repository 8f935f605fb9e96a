#!/usr/bin/env python3
"""Pipeline-1 latency of servers side by side, on fresh servers.

Per round, each server in turn (the order flips every round) starts fresh, gets a
1,000,000-key prefill of 256-byte values, then GET and SET run RUNS times each at
pipeline 1 with 50 clients for DUR seconds. Prints, per command and server, the medians of
p50, p99, ops/s and server CPU time per command, and every run's p99.

The protocol (side_by_side.py --latency) measures latency on each server after its twelve
pipelined runs; this measures it alone, to tell a server's latency from its state.

usage: benches/latency_ab.py BIN[,BIN...]   (`redis` names redis-server --io-threads 1)
  env: ROUNDS (2), RUNS (3), DUR (5), LOAD (target/release/ember-load), PORT (17990),
       AGE (0; 1: first run the protocol's twelve commands once each at pipeline 30, with
       its cleanups, so the latency runs see a server in the state the protocol leaves)
"""
import json
import os
import statistics
import subprocess
import sys

from ab import cpu_ticks, fresh_server
from side_by_side import ALL_COMMANDS, COLLECTION_COMMANDS, GROWING_KEY_COMMANDS


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bins = sys.argv[1].split(",")
    rounds = int(os.environ.get("ROUNDS", "2"))
    runs = int(os.environ.get("RUNS", "3"))
    dur = os.environ.get("DUR", "5")
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    load = os.environ.get("LOAD", f"{target}/release/ember-load")
    port = os.environ.get("PORT", "17990")
    age = os.environ.get("AGE", "0") == "1"
    common = [load, "--port", port, "--clients", "50", "--threads", "1",
              "--keyspace", "1000000", "--data-size", "256", "--seed", "1"]
    res = {b: {"GET": [], "SET": []} for b in bins}
    for r in range(rounds):
        for b in bins if r % 2 == 0 else bins[::-1]:
            server = ["redis-server", "--io-threads", "1"] if b == "redis" else [b]
            p = fresh_server(server, port, common)
            try:
                if age:
                    for c in ALL_COMMANDS:
                        subprocess.run(common + ["--command", c, "--pipeline", "30",
                                                 "--duration", dur, "--json"],
                                       stdout=subprocess.DEVNULL, check=True)
                        if c in COLLECTION_COMMANDS:
                            subprocess.run(common + ["--cleanup", "--duration", "0"],
                                           stdout=subprocess.DEVNULL, check=True)
                        if c in GROWING_KEY_COMMANDS:
                            subprocess.run(common + ["--prefill", "1000000", "--pipeline", "30",
                                                     "--duration", "0"],
                                           stdout=subprocess.DEVNULL, check=True)
                for c in ("GET", "SET"):
                    for _ in range(runs):
                        t0 = cpu_ticks(p.pid)
                        out = subprocess.run(common + ["--command", c, "--pipeline", "1",
                                                       "--duration", dur, "--json"],
                                             capture_output=True, text=True, check=True)
                        cpu_ns = (cpu_ticks(p.pid) - t0) * 1e9 / os.sysconf("SC_CLK_TCK")
                        o = json.loads(out.stdout.strip().splitlines()[-1])
                        res[b][c].append((o["p50_us"], o["p99_us"], o["ops_per_sec"],
                                          cpu_ns / o["ops"]))
            finally:
                p.terminate()
                p.wait()
    for c in ("GET", "SET"):
        for b in bins:
            xs = res[b][c]
            print(f"{c} {b}: p50 {statistics.median(x[0] for x in xs):.0f} us, "
                  f"p99 {statistics.median(x[1] for x in xs):.0f} us, "
                  f"{statistics.median(x[2] for x in xs) / 1e3:.0f}k ops/s, "
                  f"server CPU {statistics.median(x[3] for x in xs):.0f} ns/op; "
                  f"p99s {[round(x[1]) for x in xs]}", flush=True)


if __name__ == "__main__":
    main()
