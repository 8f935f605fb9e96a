#!/usr/bin/env python3
"""A/B of Ember builds: CPU time per command, fresh servers in alternating order.

Per round, each binary in turn (the order flips every round) gets a fresh server and a
1,000,000-key prefill of 256-byte values (DATA_SIZE); then each command runs for DUR seconds (the
pushes twice, with a cleanup between, and the second run kept, as the protocol's runs 2
and 3 find memory freed by the run before). The figure is the server's CPU time (user +
system, from /proc) per command; medians over the rounds, every round shown.

For changes too small for the protocol's run-to-run noise to show; the protocol
(side_by_side.py, against redis-server) stays the measure of the targets.

usage: benches/ab.py BIN_A,BIN_B[,...] [CMD,CMD,...]
  env: ROUNDS (4), DUR (4), DATA_SIZE (256), LOAD (target/release/ember-load), PORT (17800)
"""
import json
import os
import statistics
import subprocess
import sys
import time

PUSHES = ("LPUSH", "RPUSH", "SADD", "HSET")


def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def fresh_server(argv: list, port: str, load: list) -> subprocess.Popen:
    """Starts `argv` on `port` (no persistence), waits for PONG, and prefills 1,000,000
    keys with the load generator command `load`; the caller stops the process."""
    p = subprocess.Popen(argv + ["--port", port, "--save", "", "--appendonly", "no"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", port, "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.1)
        subprocess.run(load + ["--prefill", "1000000", "--duration", "0"],
                       stdout=subprocess.DEVNULL, check=True)
    except BaseException:
        p.kill()
        p.wait()
        raise
    return p


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bins = sys.argv[1].split(",")
    cmds = sys.argv[2].split(",") if len(sys.argv) > 2 else ["GET", "SET", "LPUSH"]
    rounds = int(os.environ.get("ROUNDS", "4"))
    dur = os.environ.get("DUR", "4")
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    load = os.environ.get("LOAD", f"{target}/release/ember-load")
    port = os.environ.get("PORT", "17800")
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    common = [load, "--port", port, "--clients", "50", "--threads", "1",
              "--keyspace", "1000000", "--data-size", os.environ.get("DATA_SIZE", "256"), "--seed", "1"]
    res = {b: {c: [] for c in cmds} for b in bins}
    for r in range(rounds):
        for b in bins if r % 2 == 0 else bins[::-1]:
            p = fresh_server([b], port, common)
            try:
                for c in cmds:
                    push = c in PUSHES
                    for rep in (1, 2) if push else (1,):
                        t0 = cpu_ticks(p.pid)
                        out = subprocess.run(common + ["--command", c, "--pipeline", "30",
                                                       "--duration", dur, "--json"],
                                             capture_output=True, text=True, check=True).stdout
                        t1 = cpu_ticks(p.pid)
                        ops = json.loads(out.strip().splitlines()[-1])["ops"]
                        if rep == 2 or not push:
                            res[b][c].append((t1 - t0) * tick_ns / ops)
                        if push:
                            subprocess.run(common + ["--cleanup", "--duration", "0"],
                                           stdout=subprocess.DEVNULL, check=True)
            finally:
                p.kill()
                p.wait()
    for c in cmds:
        row = [f"{c:6}"]
        for b in bins:
            v = res[b][c]
            each = ", ".join(f"{x:.0f}" for x in v)
            row.append(f"{b}: {statistics.median(v):.0f} ns/cmd [{each}]")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
