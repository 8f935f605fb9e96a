#!/usr/bin/env python3
"""Vector search benchmark: Ember's Redis 8 vector sets (VADD / VSIM over the network)
beside the in-process usearch library, on shared/data/wordnet-minilm (100,000 x 384
float32, 1,000 queries, exact ground truth).

Both sides: HNSW M=16, ef_construction=200, float32, cosine, k=10; EF 40, 80 and 150.

    python3 benches/vector.py                       # release binary, full data
    python3 benches/vector.py --n 20000 --skip-lib  # quicker

Ember: a fresh release `ember` (`--save ""`); the base is loaded with pipelined
`VADD vs FP32 <blob> <id> NOQUANT` (batches of 500) from --load-clients connections, then
the 1,000 queries run as `VSIM vs FP32 <blob> COUNT 10 EF <ef>` from 1 client (sequential)
and from 8 client processes (the queries repeated --passes times, split among them).
Memory: the server's RSS growth over the load, and INFO's used_memory growth.

Library: the `usearch` Python package, index.add(threads=2); 1 thread = one query per
call, 2 threads = one batched call with threads=2.

Prints a markdown table and writes benches/results/vector.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import redis

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "wordnet-minilm"
EFS = (40, 80, 150)
K = 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recall(found: list[list[int]], gt: np.ndarray) -> float:
    hits = 0
    for f, g in zip(found, gt):
        hits += len(set(f[:K]) & set(g[:K].tolist()))
    return hits / (len(found) * K)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ------------------------------------------------------------------------------------------
# Library

def bench_library(base, queries, gt):
    from usearch.index import Index

    idx = Index(ndim=base.shape[1], metric="cos", dtype="f32", connectivity=16,
                expansion_add=200, expansion_search=40)
    t0 = time.perf_counter()
    idx.add(np.arange(len(base), dtype=np.uint64), base, threads=2)
    build = time.perf_counter() - t0
    out = {"build_s": build, "memory_bytes": int(idx.memory_usage), "ef": {}}
    for ef in EFS:
        idx.expansion_search = ef
        found = []
        t0 = time.perf_counter()
        for q in queries:
            m = idx.search(q, K)
            found.append([int(k) for k in m.keys])
        qps1 = len(queries) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        passes = 3
        for _ in range(passes):
            bm = idx.search(queries, K, threads=2)
        qps2 = passes * len(queries) / (time.perf_counter() - t0)
        out["ef"][ef] = {"recall": recall(found, gt), "qps1": qps1, "qps2": qps2,
                         "recall_batch": recall([list(map(int, r)) for r in bm.keys], gt)}
        print(f"  library ef={ef}: recall {out['ef'][ef]['recall']:.4f} "
              f"1 thread {qps1:,.0f}/s, 2 threads {qps2:,.0f}/s", flush=True)
    return out


# ------------------------------------------------------------------------------------------
# Ember

def blob(v: np.ndarray) -> bytes:
    return v.astype("<f4").tobytes()


def load_part(args):
    port, start, end, base_path, n = args
    base = np.load(base_path, mmap_mode="r")[:n]
    r = redis.Redis(port=port)
    batch = 500
    for i in range(start, end, batch):
        p = r.pipeline(transaction=False)
        for j in range(i, min(i + batch, end)):
            p.execute_command("VADD", "vs", "FP32", blob(base[j]), str(j), "NOQUANT")
        p.execute()
    return end - start


def query_part(args):
    port, qs, ef, start_at = args
    r = redis.Redis(port=port)
    r.ping()
    while time.time() < start_at:
        time.sleep(0.001)
    t0 = time.perf_counter()
    for q in qs:
        r.execute_command("VSIM", "vs", "FP32", q, "COUNT", K, "EF", ef)
    return time.perf_counter() - t0, len(qs)


def bench_ember(binary, base_path, n, queries, gt, load_clients, passes):
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--save", ""],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        rss0 = rss_kb(proc.pid)
        used0 = int(r.info("memory")["used_memory"])
        base = np.load(base_path, mmap_mode="r")[:n]
        t0 = time.perf_counter()
        # The first element creates the set; then the loaders run in parallel.
        r.execute_command("VADD", "vs", "FP32", blob(base[0]), "0", "NOQUANT")
        step = (n - 1 + load_clients - 1) // load_clients
        parts = [(port, 1 + i * step, min(n, 1 + (i + 1) * step), str(base_path), n)
                 for i in range(load_clients)]
        with mp.Pool(load_clients) as pool:
            pool.map(load_part, parts)
        load = time.perf_counter() - t0
        assert r.execute_command("VCARD", "vs") == n
        rss1 = rss_kb(proc.pid)
        used1 = int(r.info("memory")["used_memory"])
        try:
            mem_usage = int(r.execute_command("MEMORY", "USAGE", "vs"))
        except redis.ResponseError:
            mem_usage = None
        out = {"load_s": load, "rss_growth_bytes": (rss1 - rss0) * 1024,
               "used_memory_growth_bytes": used1 - used0, "memory_usage_cmd": mem_usage,
               "ef": {}}
        print(f"  ember load {load:.1f}s, RSS +{(rss1 - rss0) / 1024:.0f} MiB, "
              f"used_memory +{(used1 - used0) / 2**20:.0f} MiB, MEMORY USAGE {mem_usage}",
              flush=True)
        qblobs = [blob(q) for q in queries]
        for ef in EFS:
            found = []
            t0 = time.perf_counter()
            for q in qblobs:
                res = r.execute_command("VSIM", "vs", "FP32", q, "COUNT", K, "EF", ef)
                found.append([int(x) for x in res])
            qps1 = len(qblobs) / (time.perf_counter() - t0)
            work = qblobs * passes
            clients = 8
            chunks = [work[i::clients] for i in range(clients)]
            start_at = time.time() + 1.0
            with mp.Pool(clients) as pool:
                t_wall = time.time()
                cpu0 = cpu_s(proc.pid)
                res = pool.map(query_part, [(port, c, ef, start_at) for c in chunks])
                cpu1 = cpu_s(proc.pid)
                wall = time.time() - max(start_at, t_wall)
            qps8 = len(work) / max(wall, max(t for t, _ in res))
            cpu_us = (cpu1 - cpu0) * 1e6 / len(work)
            out["ef"][ef] = {"recall": recall(found, gt), "qps1": qps1, "qps8": qps8,
                             "server_cpu_us_per_query": cpu_us}
            print(f"  ember ef={ef}: recall {out['ef'][ef]['recall']:.4f} "
                  f"1 client {qps1:,.0f}/s, 8 clients {qps8:,.0f}/s "
                  f"(server {cpu_us:.0f} CPU-us a query)", flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# Issue 7's goals. Redis 8's figures are from shared/data/wordnet-minilm/README.md (measured
# on this machine): 2,224 QPS with 8 clients at EF 40, 152 s to load.
REDIS8_QPS8_EF40 = 2224
REDIS8_LOAD_S = 152
M = 16


def check_goals(lib, emb, result):
    n = result["n"]
    # Vectors plus an HNSW graph's links: 2M + 1 words per node on layer 0, M + 1 on each
    # upper layer (1/M of the nodes per layer above).
    graph = n * ((2 * M + 1) + (M + 1) / (M - 1)) * 4
    budget = 1.2 * (result["raw_vector_bytes"] + graph)
    goals = []
    for ef in EFS:
        d = abs(emb["ef"][ef]["recall"] - lib["ef"][ef]["recall"])
        goals.append((f"recall@10 at EF {ef} within 0.005 of the library", d <= 0.005,
                      f"{emb['ef'][ef]['recall']:.4f} vs {lib['ef'][ef]['recall']:.4f}"))
    q = emb["ef"][40]["qps8"]
    goals.append(("8 clients at EF 40: QPS >= 2x Redis 8", q >= 2 * REDIS8_QPS8_EF40,
                  f"{q:,.0f} vs {2 * REDIS8_QPS8_EF40:,}"))
    lq = lib["ef"][40]["qps2"]
    goals.append(("8 clients at EF 40: QPS >= 0.7x the library with 2 threads", q >= 0.7 * lq,
                  f"{q:,.0f} vs {0.7 * lq:,.0f}"))
    goals.append(("load time <= Redis 8's", emb["load_s"] <= REDIS8_LOAD_S,
                  f"{emb['load_s']:.0f} s vs {REDIS8_LOAD_S} s"))
    goals.append(("memory (RSS growth) <= 1.2x raw vectors plus graph",
                  emb["rss_growth_bytes"] <= budget,
                  f"{emb['rss_growth_bytes'] / 2**20:.0f} MiB vs {budget / 2**20:.0f} MiB"))
    print("\nGoals (issue 7):")
    for name, ok, fig in goals:
        print(f"  {'met    ' if ok else 'NOT MET'}  {name}: {fig}")
    result["goals"] = [{"goal": name, "met": ok, "figures": fig} for name, ok, fig in goals]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", default=str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "ember"))
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--load-clients", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3, help="repeats of the queries for 8 clients")
    ap.add_argument("--skip-lib", action="store_true")
    ap.add_argument("--skip-ember", action="store_true")
    a = ap.parse_args()

    data = Path(a.data)
    base = np.load(data / "base.npy")[: a.n]
    queries = np.load(data / "queries.npy")
    gt_full = np.load(data / "gt.npy")
    if a.n < len(np.load(data / "base.npy", mmap_mode="r")):
        # Ground truth of the subset, by brute force (vectors are L2-normalised).
        sims = queries @ base.T
        gt = np.argsort(-sims, axis=1)[:, :K]
    else:
        gt = gt_full
    raw = base.nbytes
    print(f"data: {len(base)} x {base.shape[1]} float32 ({raw / 2**20:.0f} MiB), "
          f"{len(queries)} queries", flush=True)
    result = {"n": len(base), "dim": int(base.shape[1]), "raw_vector_bytes": raw}
    if not a.skip_lib:
        result["library"] = bench_library(base, queries, gt)
    if not a.skip_ember:
        result["ember"] = bench_ember(a.ember, data / "base.npy", a.n, queries, gt,
                                      a.load_clients, a.passes)

    print()
    print("| engine | build/load s | memory MiB | ef | recall@10 | QPS 1 client/thread | QPS 8 clients / 2 threads |")
    print("|---|---|---|---|---|---|---|")
    lib, emb = result.get("library"), result.get("ember")
    for ef in EFS:
        if lib:
            e = lib["ef"][ef]
            print(f"| usearch (Python, in-process) | {lib['build_s']:.0f} | "
                  f"{lib['memory_bytes'] / 2**20:.0f} | {ef} | {e['recall']:.4f} | "
                  f"{e['qps1']:,.0f} | {e['qps2']:,.0f} |")
        if emb:
            e = emb["ef"][ef]
            print(f"| Ember VADD/VSIM (redis-py) | {emb['load_s']:.0f} | "
                  f"{emb['rss_growth_bytes'] / 2**20:.0f} (RSS) | {ef} | {e['recall']:.4f} | "
                  f"{e['qps1']:,.0f} | {e['qps8']:,.0f} |")
    if lib and emb:
        check_goals(lib, emb, result)
    out = ROOT / "benches" / "results" / "vector.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nraw vectors {raw / 2**20:.0f} MiB; written {out}")


if __name__ == "__main__":
    sys.exit(main())
