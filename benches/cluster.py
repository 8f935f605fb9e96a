#!/usr/bin/env python3
"""Cluster benchmark: failover time over repeated leader kills, and write throughput of a
3-node cluster against a single node, side by side on this machine.

    python3 benches/cluster.py --ember target/release/ember [--kills 20] [--runs 3]

Throughput: `redis-benchmark` (Debian's) SET with 256-byte values, pipeline 30, 50
clients, random keys over 100,000; `--cluster` against the 3-node cluster (every
write replicated to 3 nodes, fsynced, through Raft), plain against a single `ember`
started with the same binary. Runs alternate; the median of `--runs` is reported with
the servers' CPU seconds (utime+stime from /proc).

Failover: a background write load (unique SETs and per-thread INCRs, no client-side
retries) runs throughout. Each round picks a random key, kills its group leader with
SIGKILL and measures the time from the kill to the first acknowledged SET of that key
through any other node (a fresh RedisCluster with 0.2 s socket timeouts, retrying every
10 ms; redis-py's own retries and slot refreshes are part of this time) and, polled at
the same time, until every surviving node's CLUSTER SLOTS names the same new master; the killed node is then restarted from its disk and the cluster waits until every
node reports cluster_state:ok. At the end every acknowledged write of the load is checked.
The same code as tests/python/test_cluster.py starts and drives the processes.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rps(out: str) -> float:
    for line in out.replace("\r", "\n").splitlines():
        if "requests per second" in line:
            return float(line.split(":")[1].split()[0])
    raise RuntimeError(f"no result in redis-benchmark output:\n{out[-2000:]}")


def bench(port: int, cluster: bool, n: int) -> float:
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-n",
            str(n), "-P", "30", "-c", "50", "-d", "256", "-r", "100000", "-q"]
    if cluster:
        argv.insert(1, "--cluster")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600).stdout
    return rps(out)


def throughput(tc, ember: str, runs: int, n: int) -> None:
    work = tempfile.mkdtemp(prefix="ember-bench-single-")
    port = tc._free_ports(1)[0]
    single = subprocess.Popen([ember, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                               work, "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    cl = tc.Cluster(groups=64)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        cl.start()
        res = {"single": [], "cluster": []}
        # One setup runs at a time: the other one is stopped (SIGSTOP) meanwhile.
        for r in range(runs):
            for node in cl.nodes:
                os.kill(node.proc.pid, signal.SIGSTOP)
            os.kill(single.pid, signal.SIGCONT)
            c0 = cpu_seconds(single.pid)
            v = bench(port, False, n)
            res["single"].append((v, n / v, cpu_seconds(single.pid) - c0))
            os.kill(single.pid, signal.SIGSTOP)
            for node in cl.nodes:
                os.kill(node.proc.pid, signal.SIGCONT)
            cl.wait_ok()
            c0 = sum(cpu_seconds(node.proc.pid) for node in cl.nodes)
            v = bench(cl.nodes[0].port, True, n)
            res["cluster"].append((v, n / v, sum(cpu_seconds(x.proc.pid) for x in cl.nodes) - c0))
            print(f"run {r + 1}: single {res['single'][-1][0]:,.0f} SET/s, "
                  f"3-node cluster {v:,.0f} SET/s", file=sys.stderr, flush=True)
        os.kill(single.pid, signal.SIGCONT)
        print("\n## Write throughput (SET, 256 B, pipeline 30, 50 clients, "
              f"{n:,} requests, median of {runs})\n")
        print("| setup | SET/s | server CPU-s | SETs per server CPU-s |")
        print("|---|---|---|---|")
        for name, label in (("single", "single node (`ember`)"),
                            ("cluster", "3-node cluster (`--cluster`, RF 3, fsync)")):
            rows = res[name]
            med = statistics.median(x[0] for x in rows)
            cpu = statistics.median(x[2] for x in rows)
            print(f"| {label} | {med:,.0f} (min {min(x[0] for x in rows):,.0f}, max "
                  f"{max(x[0] for x in rows):,.0f}) | {cpu:.2f} | {n / cpu:,.0f} |")
        ratio = statistics.median(x[0] for x in res["cluster"]) / statistics.median(
            x[0] for x in res["single"])
        print(f"\ncluster / single throughput: {ratio:.2f}x")
    finally:
        single.kill()
        cl.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(cl.root, ignore_errors=True)


def failover(tc, kills: int, seed: int) -> None:
    import redis
    rnd = random.Random(seed)
    cl = tc.Cluster(groups=64).start()
    load = tc.WriteLoad(cl, "bench").start()
    time.sleep(1)
    times = []
    elections = []
    spread = []
    try:
        for k in range(kills):
            key = f"probe:{rnd.randrange(1 << 30)}"
            victim = cl.leader_of(key)
            slot = next(n for n in cl.nodes if n is not victim).client().cluster("KEYSLOT", key)
            t0 = time.monotonic()
            victim.kill()
            survivors = cl.alive()
            wrote: list[float] = []

            def write_until_acked() -> None:
                rc = cl.rc(socket_timeout=0.2)
                while time.monotonic() - t0 < 30:
                    try:
                        rc.set(key, "x")
                        wrote.append(time.monotonic() - t0)
                        break
                    except redis.RedisError:
                        time.sleep(0.01)
                rc.close()

            writer = threading.Thread(target=write_until_acked)
            writer.start()
            # Meanwhile: when every survivor's CLUSTER SLOTS names the same new master.
            elected = None
            while elected is None and time.monotonic() - t0 < 30:
                seen = set()
                for n in survivors:
                    try:
                        with redis.Redis(host="127.0.0.1", port=n.port, socket_timeout=0.2) as r:
                            for row in r.execute_command("CLUSTER", "SLOTS"):
                                if row[0] <= slot <= row[1]:
                                    seen.add(int(row[2][1]))
                    except redis.RedisError:
                        seen.add(-1)
                if len(seen) == 1 and victim.port not in seen and -1 not in seen:
                    elected = time.monotonic() - t0
                else:
                    time.sleep(0.01)
            writer.join()
            if not wrote or elected is None:
                raise RuntimeError(f"round {k + 1}: writes did not resume in 30 s")
            took = wrote[0]
            times.append(took)
            elections.append(elected)
            print(f"kill {k + 1}: node {victim.port}, new leader in CLUSTER SLOTS after "
                  f"{elected:.3f} s, writes to {key} resumed after {took:.3f} s",
                  file=sys.stderr, flush=True)
            victim.start()
            cl.wait_ok()
            # The rebalancer hands the restarted node its share of leaders back (under
            # the load); the next round starts from a spread cluster.
            t1 = time.monotonic()
            while True:
                counts = tc._leader_counts(cl, 64)
                if len(counts) == 3 and max(counts.values()) - min(counts.values()) <= 1:
                    break
                if time.monotonic() - t1 > 30:
                    break
                time.sleep(0.2)
            spread.append((time.monotonic() - t1, sorted(counts.values())))
            print(f"  leaders per node {sorted(counts.values())} "
                  f"{time.monotonic() - t1:.1f} s after the cluster was ok again",
                  file=sys.stderr, flush=True)
            time.sleep(0.5)
        load.finish()
        load.check()
        print(f"\n## Failover over {kills} leader kills (SIGKILL, node timeout "
              f"{tc.NODE_TIMEOUT_MS} ms)\n")
        print(f"first acknowledged write through RedisCluster: median "
              f"{statistics.median(times):.3f} s, max {max(times):.3f} s, "
              f"min {min(times):.3f} s")
        print(f"\nnew leader named by every survivor's CLUSTER SLOTS: median "
              f"{statistics.median(elections):.3f} s, max {max(elections):.3f} s, "
              f"min {min(elections):.3f} s")
        balanced = [t for t, c in spread if c[-1] - c[0] <= 1]
        print(f"\nleaders spread again (max - min <= 1) after {len(balanced)} of "
              f"{len(spread)} restarts, median {statistics.median(balanced) if balanced else 0:.1f} s "
              "after the cluster was ok (the rebalancer)")
        print(f"\nwrite load during the kills: {len(load.acked_sets):,} acknowledged SETs "
              f"and {sum(load.incr_acked):,} INCRs, {load.errors:,} failed calls; "
              "every acknowledged write present afterwards")
    finally:
        load.stop_flag.set()
        cl.stop()
        shutil.rmtree(cl.root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember", default=os.path.join(REPO, "target/release/ember"))
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-failover", action="store_true")
    args = ap.parse_args()
    os.environ["EMBER_BIN"] = os.path.abspath(args.ember)
    sys.path.insert(0, os.path.join(REPO, "tests", "python"))
    import test_cluster as tc  # noqa: E402  (the real-process test's cluster driver)
    if not args.skip_throughput:
        throughput(tc, os.path.abspath(args.ember), args.runs, args.requests)
    if not args.skip_failover:
        failover(tc, args.kills, args.seed)


if __name__ == "__main__":
    main()
