#!/usr/bin/env python3
"""Side-by-side throughput benchmark: Ember against redis-server, same machine, same generator.

Implements the protocol of BENCHMARKS.md ("The 12-command throughput benchmark"): each
server is started fresh (one at a time, on a free port in the same range), prefilled with
`--keyspace` keys of 256-byte values, and loaded command by command with `ember-load`
(or Debian's `redis-benchmark` with `--generator redis-benchmark`), `--runs` runs of
`--duration` seconds each. The server's CPU (utime+stime of /proc/PID/stat) is read
before and after every run. The table gives the median and min-max spread of ops/s, ops
per server CPU-second, both ratios Ember/redis, the generator's CPU, and notes.

Only measured figures are printed; a command a server does not know is "n/a".
Python 3.11, standard library only. See benches/README.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

ALL_COMMANDS = ["SET", "GET", "MGET", "SETNX", "APPEND", "INCR",
                "LPUSH", "RPUSH", "SADD", "HSET", "MSET", "PING"]
# Commands that grow collection keys: DEL them after every run so each run starts alike.
COLLECTION_COMMANDS = {"LPUSH", "RPUSH", "SADD", "HSET"}
# Commands that grow key:<n> values: re-SET them to 256 bytes after every run.
GROWING_KEY_COMMANDS = {"APPEND"}
# redis-benchmark test names, and how its workload differs from ember-load's.
RB_TESTS = {
    "SET": ("set", "key:%012d keys"),
    "GET": ("get", "key:%012d keys (filled by its own SET test, not the prefill)"),
    "INCR": ("incr", "counter:%012d keys"),
    "LPUSH": ("lpush", "one key 'mylist'"),
    "RPUSH": ("rpush", "one key 'mylist'"),
    "SADD": ("sadd", "one key 'myset'"),
    "HSET": ("hset", "one key 'myhash'"),
    "MSET": ("mset", "10 pairs per MSET"),
    "PING": ("ping_mbulk", "PING_MBULK"),
}
GEN_BOUND_PCT = 85.0
# A run during which other processes used more than this many cores is "contended".
CONTENDED_CORES = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


class Processes:
    """Every child we start, so that all of them die with us (also on Ctrl-C)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def add(self, p: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, grace: float = 5.0) -> None:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self) -> None:
        for p in list(self.procs):
            self.stop(p, grace=2.0)


PROCS = Processes()


def on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of every thread of `pid`, in seconds: its own code, and the kernel's
    work for it (system calls, page faults, the loopback network stack)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) / CLK_TCK, int(rest[12]) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU-seconds all CPUs have spent running processes since boot (/proc/stat).

    user + nice + system: interrupt and softirq time (largely the loopback traffic of the
    benchmark itself, charged to no process) and steal are left out.
    """
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:4]]
    return sum(fields) / CLK_TCK


def own_and_children_cpu_seconds() -> float:
    """CPU-seconds of this driver plus its waited-for children (the generators)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


class Window:
    """Server CPU, and the CPU the rest of the machine used, over one measured run."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.user0, self.sys0 = proc_cpu_split(pid)
        self.user_s: float | None = None
        self.sys_s: float | None = None
        self.busy0 = machine_busy_seconds()
        self.ours0 = own_and_children_cpu_seconds()
        self.t0 = time.monotonic()

    def close(self) -> tuple[float, float]:
        """(server CPU-seconds, cores used by everything else: not server, generator, driver).

        Call it after the generator has been waited for, so its CPU is counted as ours.
        """
        user, sys_ = proc_cpu_split(self.pid)
        self.user_s, self.sys_s = user - self.user0, sys_ - self.sys0
        server = self.user_s + self.sys_s
        busy = machine_busy_seconds() - self.busy0
        ours = own_and_children_cpu_seconds() - self.ours0
        wall = time.monotonic() - self.t0
        return server, max(0.0, busy - server - ours) / max(wall, 1e-9)


def proc_rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def free_port(base: int, span: int = 1000) -> int:
    for port in range(base, base + span):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}..{base + span - 1}")


# ---------------------------------------------------------------- tiny RESP client


class Resp:
    """A blocking RESP client for the few admin commands the driver needs."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def close(self) -> None:
        self.f.close()
        self.sock.close()

    def call(self, *args: str | bytes):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed")
        kind, body = line[:1], line[1:-2]
        if kind in (b"+", b":", b",", b"#", b"("):
            return body.decode(errors="replace")
        if kind == b"-":
            return RespError(body.decode(errors="replace"))
        if kind == b"_":
            return None
        if kind in (b"$", b"=", b"!"):
            n = int(body)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return RespError(data.decode(errors="replace")) if kind == b"!" else data
        if kind in (b"*", b"~", b">"):
            n = int(body)
            return None if n < 0 else [self._read() for _ in range(n)]
        if kind == b"%":
            return {str(self._read()): self._read() for _ in range(int(body))}
        raise ValueError(f"unexpected reply {line!r}")


class RespError(str):
    """An error reply."""


def info_field(port: int, section: str, name: str) -> int | None:
    """An integer field of INFO <section>, or None where the server has no such field."""
    try:
        c = Resp(port)
        try:
            r = c.call("INFO", section)
        finally:
            c.close()
    except OSError:
        return None
    if not isinstance(r, (bytes, str)) or isinstance(r, RespError):
        return None
    text = r.decode(errors="replace") if isinstance(r, bytes) else r
    for line in text.splitlines():
        if line.startswith(name + ":"):
            try:
                return int(line.split(":", 1)[1].strip())
            except ValueError:
                return None
    return None


def wait_for_ping(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before answering PING")
        try:
            c = Resp(port, timeout=1.0)
            try:
                if c.call("PING") == "PONG":
                    return
            finally:
                c.close()
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not answer PING on port {port} within {timeout:.0f} s")


# ---------------------------------------------------------------- servers


@dataclass
class Server:
    name: str
    proc: subprocess.Popen
    port: int
    logpath: str


def start_server(name: str, argv: list[str], port: int, logdir: str) -> Server:
    logpath = os.path.join(logdir, f"{name}-{port}.log")
    logf = open(logpath, "wb")
    log(f"starting {name}: {shlex.join(argv)}")
    try:
        proc = PROCS.add(subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
    finally:
        logf.close()
    srv = Server(name, proc, port, logpath)
    try:
        wait_for_ping(port, proc)
    except Exception:
        PROCS.stop(proc)
        with open(logpath, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        raise RuntimeError(f"{name} did not start; log tail:\n{tail}")
    return srv


def server_argv(name: str, opts, port: int, ember_threads: int | None = None) -> list[str]:
    if name == "redis":
        return [opts.redis, "--save", "", "--appendonly", "no", "--io-threads", "1",
                "--port", str(port)]
    argv = [opts.ember, "--port", str(port), "--save", "", "--appendonly", "no"]
    if ember_threads is not None:
        argv += [opts.ember_threads_flag, str(ember_threads)]
    return argv + shlex.split(opts.ember_args)


def version_of(path: str) -> str:
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown version"


# ---------------------------------------------------------------- generator runs


@dataclass
class Run:
    """One measured run of one command against one server."""
    ops_per_sec: float
    ops: int
    duration_s: float
    server_cpu_s: float
    gen_cpu_pct: float | None
    errors: int
    first_error: str | None
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    other_cores: float | None = None
    server_user_s: float | None = None
    server_sys_s: float | None = None

    @property
    def ops_per_cpu_s(self) -> float | None:
        return self.ops / self.server_cpu_s if self.server_cpu_s > 0 else None

    @property
    def server_cores(self) -> float:
        return self.server_cpu_s / self.duration_s if self.duration_s > 0 else 0.0


@dataclass
class Outcome:
    """All runs of one command against one server."""
    runs: list[Run] = field(default_factory=list)
    unsupported: str | None = None
    failed: str | None = None
    notes: list[str] = field(default_factory=list)


def load_argv(opts, port: int, extra: list[str]) -> list[str]:
    return [opts.load, "--port", str(port), "--clients", str(opts.clients),
            "--threads", str(opts.threads), "--keyspace", str(opts.keyspace),
            "--data-size", str(opts.data_size), "--seed", str(opts.seed)] + extra


def run_child(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Runs argv to completion; returns (status, stdout, stderr)."""
    p = PROCS.add(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        PROCS.stop(p)
        raise RuntimeError(f"timed out after {timeout:.0f} s: {shlex.join(argv)}")
    finally:
        if p in PROCS.procs:
            PROCS.procs.remove(p)
    return p.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def setup_step(opts, srv: Server, extra: list[str], what: str) -> None:
    """A non-measured ember-load invocation (prefill or cleanup)."""
    status, out, err = run_child(load_argv(opts, srv.port, extra + ["--duration", "0", "--json"]),
                                    timeout=1800)
    if status != 0:
        raise RuntimeError(f"{what} on {srv.name} failed ({status}): {err.strip() or out.strip()}")
    rep = json.loads(out.strip().splitlines()[-1])
    if rep.get("setup_errors"):
        raise RuntimeError(f"{what} on {srv.name}: {rep['setup_errors']} error replies, "
                           f"first: {rep.get('setup_first_error')}")


def measure_ember_load(opts, srv: Server, command: str, pipeline: int, duration: float,
                       out: Outcome) -> None:
    argv = load_argv(opts, srv.port, ["--command", command, "--pipeline", str(pipeline),
                                      "--duration", str(duration),
                                      "--mget-keys", str(opts.mget_keys),
                                      "--mset-pairs", str(opts.mset_pairs), "--json"])
    win = Window(srv.proc.pid)
    status, stdout, stderr = run_child(argv, timeout=duration + 120)
    server_cpu, others = win.close()
    if srv.proc.poll() is not None:
        out.failed = f"server died (status {srv.proc.returncode})"
        return
    lines = stdout.strip().splitlines()
    rep = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
    if status == 3 or (rep and rep.get("unsupported")):
        out.unsupported = (rep or {}).get("probe_error") or (rep or {}).get("first_error") \
            or "unknown command"
        return
    if status != 0 or rep is None or "ops" not in rep:
        out.failed = (stderr.strip() or stdout.strip() or f"status {status}")[-300:]
        return
    out.runs.append(Run(
        ops_per_sec=rep["ops_per_sec"], ops=rep["ops"], duration_s=rep["duration_s"],
        server_cpu_s=server_cpu, gen_cpu_pct=rep.get("gen_cpu_pct"),
        errors=rep["errors"], first_error=rep.get("first_error"),
        p50_us=rep.get("p50_us"), p99_us=rep.get("p99_us"), p999_us=rep.get("p999_us"),
        other_cores=others, server_user_s=win.user_s, server_sys_s=win.sys_s))


def measure_redis_benchmark(opts, srv: Server, command: str, pipeline: int, out: Outcome) -> None:
    if command not in RB_TESTS:
        out.unsupported = "not a redis-benchmark test"
        return
    test, note = RB_TESTS[command]
    if note not in out.notes:
        out.notes.append(note)
    argv = [opts.redis_benchmark, "-p", str(srv.port), "-P", str(pipeline),
            "-c", str(opts.clients), "-d", str(opts.data_size), "-r", str(opts.keyspace),
            "-n", str(opts.rb_requests), "-t", test, "--csv"]
    if opts.threads > 1:
        argv += ["--threads", str(opts.threads)]
    win = Window(srv.proc.pid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    status, stdout, stderr = run_child(argv, timeout=1800)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu, others = win.close()
    if status != 0:
        out.failed = (stderr.strip() or stdout.strip())[-300:]
        return
    row = None
    for cells in csv.reader(stdout.splitlines()):
        if cells and cells[0].split(" ")[0].lower() == test:
            row = cells
    if row is None:
        out.failed = f"no {test} line in redis-benchmark output: {stdout.strip()[-300:]}"
        return
    rps = float(row[1])
    duration = opts.rb_requests / rps
    gen_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    out.runs.append(Run(
        ops_per_sec=rps, ops=opts.rb_requests, duration_s=duration,
        server_cpu_s=server_cpu, gen_cpu_pct=100.0 * gen_cpu / max(wall, 1e-9),
        errors=0, first_error=None, other_cores=others,
        server_user_s=win.user_s, server_sys_s=win.sys_s,
        p50_us=float(row[4]) * 1000 if len(row) > 4 else None,
        p99_us=float(row[6]) * 1000 if len(row) > 6 else None))


def reset_after_run(opts, srv: Server, command: str) -> None:
    if command in COLLECTION_COMMANDS:
        setup_step(opts, srv, ["--cleanup"], "collection cleanup")
    if command in GROWING_KEY_COMMANDS:
        setup_step(opts, srv, ["--prefill", str(opts.keyspace), "--pipeline", str(opts.pipeline)],
                   "re-prefill")


def bench_server(opts, name: str, logdir: str, commands: list[str],
                 ember_threads: int | None = None, latency: bool = False) -> dict:
    """Starts one server, measures it, stops it; returns its results."""
    port = free_port(opts.port_base)
    srv = start_server(name, server_argv(name, opts, port, ember_threads), port, logdir)
    res: dict = {"port": port, "commands": {}, "latency": {}}
    try:
        base_mem = info_field(port, "memory", "used_memory")
        base_rss = proc_rss_bytes(srv.proc.pid)
        log(f"{name}: prefilling {opts.keyspace} keys of {opts.data_size} bytes")
        t0 = time.monotonic()
        setup_step(opts, srv, ["--prefill", str(opts.keyspace), "--pipeline", str(opts.pipeline)],
                   "prefill")
        res["prefill_s"] = time.monotonic() - t0
        dbsize = None
        try:
            c = Resp(port)
            d = c.call("DBSIZE")
            c.close()
            dbsize = int(d) if isinstance(d, str) and not isinstance(d, RespError) else None
        except (OSError, ValueError):
            pass
        res["dbsize_after_prefill"] = dbsize
        mem = info_field(port, "memory", "used_memory")
        rss = proc_rss_bytes(srv.proc.pid)
        res["used_memory_per_key"] = ((mem - base_mem) / opts.keyspace
                                      if mem is not None and base_mem is not None else None)
        res["rss_per_key"] = ((rss - base_rss) / opts.keyspace
                              if rss is not None and base_rss is not None else None)
        for cmd in commands:
            out = Outcome()
            for i in range(opts.runs):
                if opts.generator == "redis-benchmark":
                    measure_redis_benchmark(opts, srv, cmd, opts.pipeline, out)
                else:
                    measure_ember_load(opts, srv, cmd, opts.pipeline, opts.duration, out)
                if out.unsupported or out.failed:
                    break
                r = out.runs[-1]
                log(f"{name} {cmd} run {i + 1}/{opts.runs}: {r.ops_per_sec:,.0f} ops/s, "
                    f"server {r.server_cores:.2f} cores, generator "
                    f"{r.gen_cpu_pct if r.gen_cpu_pct is not None else float('nan'):.0f}%, "
                    f"other processes "
                    f"{r.other_cores if r.other_cores is not None else float('nan'):.2f} cores"
                    + (f", {r.errors} errors" if r.errors else ""))
                reset_after_run(opts, srv, cmd)
            if out.unsupported:
                log(f"{name} {cmd}: unsupported ({out.unsupported})")
            if out.failed:
                log(f"{name} {cmd}: FAILED: {out.failed}")
                if srv.proc.poll() is not None:
                    res["commands"][cmd] = out
                    raise RuntimeError(f"{name} exited during {cmd}; log: {srv.logpath}")
            res["commands"][cmd] = out
        if latency:
            for cmd in ("GET", "SET"):
                out = Outcome()
                for _ in range(opts.runs):
                    measure_ember_load(opts, srv, cmd, 1, opts.duration, out)
                    if out.unsupported or out.failed:
                        break
                res["latency"][cmd] = out
                log(f"{name} {cmd} pipeline 1: "
                    + (", ".join(f"p50 {r.p50_us}us p99 {r.p99_us}us" for r in out.runs)
                       or out.unsupported or out.failed or ""))
    finally:
        PROCS.stop(srv.proc)
    return res


# ---------------------------------------------------------------- formatting


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def med_spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt_rate(m)
    return f"{fmt_rate(m)} ({fmt_rate(min(values))}–{fmt_rate(max(values))})"


def median_or_none(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def outcome_cells(o: Outcome | None) -> tuple[str, str, float | None, float | None]:
    """(ops/s cell, ops/CPU-s cell, median ops/s, median ops/CPU-s)."""
    if o is None:
        return "not run", "not run", None, None
    if o.unsupported:
        return "n/a", "n/a", None, None
    if o.failed and not o.runs:
        return "failed", "failed", None, None
    ops = [r.ops_per_sec for r in o.runs]
    eff = [r.ops_per_cpu_s for r in o.runs if r.ops_per_cpu_s is not None]
    return med_spread(ops), med_spread(eff), median_or_none(ops), median_or_none(eff)


def notes_for(name: str, o: Outcome | None) -> list[str]:
    if o is None:
        return []
    n = []
    if o.unsupported:
        why = "unknown command" if "unknown command" in o.unsupported.lower() else o.unsupported
        n.append(f"{name}: n/a ({why[:60]})")
    if o.failed:
        n.append(f"{name}: FAILED ({o.failed[:80]})")
    gen = [r.gen_cpu_pct for r in o.runs if r.gen_cpu_pct is not None]
    if gen and max(gen) > GEN_BOUND_PCT:
        n.append(f"{name}: generator-bound")
    others = [r.other_cores for r in o.runs if r.other_cores is not None]
    if others and max(others) > CONTENDED_CORES:
        n.append(f"{name}: contended (other processes used up to {max(others):.2f} cores)")
    errs = sum(r.errors for r in o.runs)
    if errs:
        first = next((r.first_error for r in o.runs if r.first_error), "")
        n.append(f"{name}: {errs} errors ({(first or '')[:60]})")
    n += [f"{name}: {x}" for x in o.notes]
    return n


def gen_cell(names: list[str], outs: list[Outcome | None]) -> str:
    cells = []
    for name, o in zip(names, outs):
        gen = [r.gen_cpu_pct for r in (o.runs if o else []) if r.gen_cpu_pct is not None]
        if gen:
            cells.append(f"{name[0]} {statistics.median(gen):.0f}%")
    return " / ".join(cells) or "n/a"


def print_main_table(opts, results: dict, commands: list[str]) -> None:
    names = [n for n in ("ember", "redis") if n in results]
    print("| command | ember ops/s (median, min–max) | redis ops/s | ratio | "
          "ember ops/CPU-s | redis ops/CPU-s | ratio | gen CPU% (e / r) | notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cmd in commands:
        outs = {n: results[n]["commands"].get(cmd) for n in names}
        cells = {n: outcome_cells(outs[n]) if n in results else ("not run", "not run", None, None)
                 for n in ("ember", "redis")}
        e_ops, e_eff, e_m, e_em = cells["ember"]
        r_ops, r_eff, r_m, r_em = cells["redis"]
        notes = [x for n in names for x in notes_for(n, outs[n])]
        print(f"| {cmd} | {e_ops} | {r_ops} | {ratio(e_m, r_m)} | {e_eff} | {r_eff} | "
              f"{ratio(e_em, r_em)} | {gen_cell(names, [outs[n] for n in names])} | "
              f"{'; '.join(notes)} |")


def ns_per_op(o: Outcome | None, attr: str) -> float | None:
    """Median over runs of the server's `attr` CPU-seconds per request, in nanoseconds."""
    if o is None:
        return None
    v = [getattr(r, attr) / r.ops * 1e9 for r in o.runs
         if getattr(r, attr) is not None and r.ops > 0]
    return statistics.median(v) if v else None


def print_cpu_split(results: dict, commands: list[str]) -> None:
    """Where each server's CPU per request went: its own code (user) or the kernel's."""
    if not all(n in results for n in ("ember", "redis")):
        return
    print("\nServer CPU per request, median of the runs (ns): user = the server's own code; "
          "kernel = its system calls, page faults and the loopback network stack. "
          "A ratio is redis/ember (above 1: ember spends less).\n")
    print("| command | ember user | ember kernel | redis user | redis kernel | user ratio | "
          "kernel ratio |")
    print("|---|---|---|---|---|---|---|")
    for cmd in commands:
        e = results["ember"]["commands"].get(cmd)
        r = results["redis"]["commands"].get(cmd)
        eu, es = ns_per_op(e, "server_user_s"), ns_per_op(e, "server_sys_s")
        ru, rs = ns_per_op(r, "server_user_s"), ns_per_op(r, "server_sys_s")
        if None in (eu, es, ru, rs):
            continue
        cell = lambda v: f"{v:.0f}"  # noqa: E731
        print(f"| {cmd} | {cell(eu)} | {cell(es)} | {cell(ru)} | {cell(rs)} | "
              f"{ratio(ru, eu)} | {ratio(rs, es)} |")


def print_memory(opts, results: dict) -> None:
    parts = []
    for name in ("ember", "redis"):
        if name not in results:
            continue
        res = results[name]
        um, rss = res.get("used_memory_per_key"), res.get("rss_per_key")
        parts.append(f"{name} used_memory {um:.0f} B/key" if um is not None
                     else f"{name} used_memory n/a (no INFO memory)")
        if rss is not None:
            parts[-1] += f", RSS {rss:.0f} B/key"
        if res.get("dbsize_after_prefill") is not None:
            parts[-1] += f" (DBSIZE {res['dbsize_after_prefill']})"
    line = "; ".join(parts)
    e = results.get("ember", {}).get("used_memory_per_key")
    r = results.get("redis", {}).get("used_memory_per_key")
    if e is not None and r is not None:
        line += f"; ratio ember/redis {e / r:.2f}x"
    print(f"\nMemory after prefilling {opts.keyspace:,} keys of {opts.data_size} bytes "
          f"(minus the empty server): {line}")


def print_latency(opts, results: dict) -> None:
    print(f"\nLatency per request at pipeline 1, {opts.clients} clients "
          f"(median over {opts.runs} run(s), microseconds):\n")
    print("| command | ember p50 | ember p99 | redis p50 | redis p99 | ember ops/s | redis ops/s |")
    print("|---|---|---|---|---|---|---|")
    for cmd in ("GET", "SET"):
        cells = []
        rates = []
        for name in ("ember", "redis"):
            o = results.get(name, {}).get("latency", {}).get(cmd)
            if o is None or not o.runs:
                reason = "not run" if o is None else ("n/a" if o.unsupported else "failed")
                cells += [reason, reason]
                rates.append(reason)
                continue
            cells.append(f"{median_or_none([r.p50_us for r in o.runs]):.0f}")
            cells.append(f"{median_or_none([r.p99_us for r in o.runs]):.0f}")
            rates.append(fmt_rate(median_or_none([r.ops_per_sec for r in o.runs])))
        print(f"| {cmd} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {rates[0]} | {rates[1]} |")


TARGET_RATIO = 1.5


def ratio_verdict(what: str, pairs: list[tuple[str, float | None, float | None]]) -> str:
    """'met by k of n (...)' for ember/redis ratios of at least TARGET_RATIO."""
    measured = [(c, e / r) for c, e, r in pairs if e is not None and r]
    if not measured:
        return f"{what}: not measured"
    low = [f"{c} {x:.2f}x" for c, x in measured if x < TARGET_RATIO]
    head = (f"{what} >= {TARGET_RATIO}x redis: met by {len(measured) - len(low)} of "
            f"{len(measured)}")
    return head + (f"; not by {', '.join(low)}" if low else " (all)")


def print_targets(opts, results: dict, commands: list[str]) -> None:
    """Issue 8's five targets against this run's medians (a ratio in one run, so the same
    minutes judge both servers)."""
    if not all(n in results for n in ("ember", "redis")):
        return
    e, r = results["ember"], results["redis"]
    thr, eff = [], []
    for cmd in commands:
        _, _, e_ops, e_eff = outcome_cells(e["commands"].get(cmd))
        _, _, r_ops, r_eff = outcome_cells(r["commands"].get(cmd))
        thr.append((cmd, e_ops, r_ops))
        eff.append((cmd, e_eff, r_eff))
    print("\nAgainst the targets (medians of this run):\n")
    print(f"1. {ratio_verdict('Throughput (ops/s)', thr)}")
    print(f"2. {ratio_verdict('Efficiency (ops per server CPU-s)', eff)}")
    if opts.latency:
        worse = []
        n = 0
        for cmd in ("GET", "SET"):
            eo, ro = e["latency"].get(cmd), r["latency"].get(cmd)
            if not (eo and eo.runs and ro and ro.runs):
                continue
            for q in ("p50_us", "p99_us"):
                ev = median_or_none([getattr(x, q) for x in eo.runs])
                rv = median_or_none([getattr(x, q) for x in ro.runs])
                if ev is None or rv is None:
                    continue
                n += 1
                if ev > rv:
                    worse.append(f"{cmd} {q[:3]} {ev:.0f} > {rv:.0f} us")
        verdict = ("not measured" if n == 0 else
                   f"{n - len(worse)} of {n} no worse than redis"
                   + (f"; worse: {', '.join(worse)}" if worse else " (all)"))
        print(f"3. Latency at pipeline 1 (GET, SET; p50, p99): {verdict}")
    else:
        print("3. Latency at pipeline 1: not measured (--latency)")
    em, rm = e.get("used_memory_per_key"), r.get("used_memory_per_key")
    if em is not None and rm is not None:
        print(f"4. Memory per key: ember {em:.0f} B, redis {rm:.0f} B: "
              + ("met" if em <= rm else "not met"))
    else:
        print("4. Memory per key: not measured")
    print("5. Scaling: see --scaling 1,2 (--threads 1 for the generator)")


def print_scaling_verdict(opts, results: dict, counts: list[int]) -> None:
    """Target 5: more threads beat fewer, command by command."""
    if len(counts) < 2:
        return
    lo, hi = min(counts), max(counts)
    beat, lost = [], []
    for cmd in opts.commands:
        _, _, a, _ = outcome_cells(results[f"ember-{lo}"]["commands"].get(cmd))
        _, _, b, _ = outcome_cells(results[f"ember-{hi}"]["commands"].get(cmd))
        if a is None or b is None:
            continue
        (beat if b > a else lost).append(f"{cmd} {b / a:.2f}x")
    print(f"\nScaling target: {hi} threads beat {lo} for {len(beat)} of {len(beat) + len(lost)} "
          f"commands" + (f"; not for {', '.join(lost)}" if lost else " (all)")
          + (f" ({', '.join(beat)})" if beat else ""))


def print_details(results: dict) -> None:
    print("\nEvery run (ops/s; server CPU in cores = CPU-s per second; generator CPU % of a core; "
          "latency p50/p99 per request, us; other cores = CPU used by every other process on "
          "the machine during the run):\n")
    print("| server | command | ops/s per run | server cores | gen CPU% | p50 | p99 | other cores "
          "| errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("ember", "redis"):
        for cmd, o in results.get(name, {}).get("commands", {}).items():
            if not o.runs:
                continue
            rs = o.runs
            print(f"| {name} | {cmd} | {', '.join(fmt_rate(r.ops_per_sec) for r in rs)} | "
                  f"{', '.join(f'{r.server_cores:.2f}' for r in rs)} | "
                  f"{', '.join('n/a' if r.gen_cpu_pct is None else f'{r.gen_cpu_pct:.0f}' for r in rs)} | "
                  f"{', '.join('n/a' if r.p50_us is None else f'{r.p50_us:.0f}' for r in rs)} | "
                  f"{', '.join('n/a' if r.p99_us is None else f'{r.p99_us:.0f}' for r in rs)} | "
                  f"{', '.join('n/a' if r.other_cores is None else f'{r.other_cores:.2f}' for r in rs)} | "
                  f"{sum(r.errors for r in rs)} |")


def machine_line() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model})"


def to_jsonable(results: dict) -> dict:
    def conv(o):
        if isinstance(o, Outcome):
            return {"runs": [dict(r.__dict__, ops_per_cpu_s=r.ops_per_cpu_s) for r in o.runs],
                    "unsupported": o.unsupported, "failed": o.failed, "notes": o.notes}
        if isinstance(o, dict):
            return {str(k): conv(v) for k, v in o.items()}
        return o
    return conv(results)


# ---------------------------------------------------------------- main


def default_bin(name: str) -> str:
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    return os.path.join(target, "release", name)


def parse_args(argv: list[str] | None = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ember", default=default_bin("ember"), help="ember binary")
    p.add_argument("--redis", default="redis-server", help="redis-server binary")
    p.add_argument("--load", default=default_bin("ember-load"), help="ember-load binary")
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    p.add_argument("--generator", choices=["ember-load", "redis-benchmark"], default="ember-load")
    p.add_argument("--commands", default=",".join(ALL_COMMANDS))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--keyspace", type=int, default=1_000_000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--pipeline", type=int, default=30)
    p.add_argument("--threads", type=int, default=1, help="generator threads")
    p.add_argument("--data-size", type=int, default=256)
    p.add_argument("--mget-keys", type=int, default=8)
    p.add_argument("--mset-pairs", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latency", action="store_true",
                   help="also p50/p99 of GET and SET at pipeline 1")
    p.add_argument("--scaling", default=None, metavar="N,N,...",
                   help="run only ember, once per server thread count")
    p.add_argument("--ember-threads-flag", default="--threads",
                   help="ember's option for its thread count (for --scaling)")
    p.add_argument("--ember-args", default="", help="extra arguments for ember")
    p.add_argument("--only", choices=["ember", "redis"], default=None)
    p.add_argument("--port-base", type=int, default=17000)
    p.add_argument("--rb-requests", type=int, default=2_000_000,
                   help="requests per redis-benchmark run")
    p.add_argument("--json-out", default=None, help="also write every figure to this file")
    o = p.parse_args(argv)
    o.commands = [c.strip().upper() for c in o.commands.split(",") if c.strip()]
    bad = [c for c in o.commands if c not in ALL_COMMANDS]
    if bad:
        p.error(f"unknown commands {bad}; choose from {','.join(ALL_COMMANDS)}")
    if o.runs < 1 or o.duration <= 0:
        p.error("--runs must be >= 1 and --duration > 0")
    return o


def check_binary(path: str, what: str) -> None:
    if os.sep in path:
        if not os.access(path, os.X_OK):
            raise SystemExit(f"{what} not found at {path}")
    elif not any(os.access(os.path.join(d, path), os.X_OK)
                 for d in os.environ.get("PATH", "").split(os.pathsep)):
        raise SystemExit(f"{what} {path!r} not on PATH")


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    check_binary(opts.load, "ember-load (cargo build --release -p ember-benches)")
    servers = ["ember", "redis"] if opts.only is None else [opts.only]
    if opts.scaling:
        servers = ["ember"]
    if "ember" in servers:
        check_binary(opts.ember, "ember (cargo build --release -p ember-node)")
    if "redis" in servers:
        check_binary(opts.redis, "redis-server")
    if opts.generator == "redis-benchmark":
        check_binary(opts.redis_benchmark, "redis-benchmark")

    logdir = tempfile.mkdtemp(prefix="side_by_side-")
    results: dict = {}
    started = time.monotonic()
    try:
        if opts.scaling:
            counts = [int(x) for x in opts.scaling.split(",") if x.strip()]
            for n in counts:
                results[f"ember-{n}"] = bench_server(opts, "ember", logdir, opts.commands,
                                                     ember_threads=n)
            print_scaling(opts, results, counts)
            print_scaling_verdict(opts, results, counts)
        else:
            for name in servers:
                results[name] = bench_server(opts, name, logdir, opts.commands,
                                             latency=opts.latency)
            print_header(opts, servers)
            print_main_table(opts, results, opts.commands)
            print_cpu_split(results, opts.commands)
            print_memory(opts, results)
            if opts.latency:
                print_latency(opts, results)
            print_targets(opts, results, opts.commands)
            print_details(results)
        print(f"\n(total wall time {time.monotonic() - started:.0f} s; server logs in {logdir})")
        if opts.json_out:
            with open(opts.json_out, "w") as f:
                json.dump({"options": vars(opts), "results": to_jsonable(results)}, f, indent=1)
    except KeyboardInterrupt:
        log("interrupted; stopping servers")
        return 130
    except RuntimeError as e:
        log(f"error: {e}")
        return 1
    finally:
        PROCS.stop_all()
    return 0


def print_header(opts, servers: list[str]) -> None:
    gen = ("ember-load" if opts.generator == "ember-load"
           else f"redis-benchmark ({opts.rb_requests:,} requests per run)")
    print(f"\n## Side by side: {', '.join(servers)}\n")
    print(f"- machine: {machine_line()}")
    if "ember" in servers:
        print(f"- ember: {opts.ember} ({version_of(opts.ember)}) {opts.ember_args}".rstrip())
    if "redis" in servers:
        print(f"- redis: {opts.redis} ({version_of(opts.redis)}), --save '' --appendonly no --io-threads 1")
    print(f"- generator: {gen}, {opts.threads} thread(s), {opts.clients} connections, "
          f"pipeline {opts.pipeline}, {opts.data_size}-byte values, keyspace {opts.keyspace:,} "
          f"(prefilled), MGET {opts.mget_keys} keys, MSET {opts.mset_pairs} pairs")
    if opts.generator == "ember-load":
        print(f"- {opts.runs} run(s) of {opts.duration:g} s per command per server; "
              "median (min–max); ops/CPU-s = ops / server CPU-seconds in the run\n")
    else:
        print(f"- {opts.runs} run(s) per command per server; median (min–max)\n")


def print_scaling(opts, results: dict, counts: list[int]) -> None:
    print(f"\n## Ember thread scaling ({machine_line()}; generator {opts.threads} thread(s), "
          f"{opts.clients} connections, pipeline {opts.pipeline}; {opts.runs} run(s) of "
          f"{opts.duration:g} s)\n")
    print("| command | " + " | ".join(f"{n} thread(s): ops/s (server cores, gen CPU%)"
                                      for n in counts) + " | notes |")
    print("|---|" + "---|" * len(counts) + "---|")
    for cmd in opts.commands:
        cells, notes = [], []
        for n in counts:
            o = results[f"ember-{n}"]["commands"].get(cmd)
            ops, _, _, _ = outcome_cells(o)
            if o and o.runs:
                cores = statistics.median(r.server_cores for r in o.runs)
                gen = median_or_none([r.gen_cpu_pct for r in o.runs])
                ops += f" ({cores:.2f}, {gen:.0f}%)" if gen is not None else f" ({cores:.2f})"
            cells.append(ops)
            notes += notes_for(f"{n}t", o)
        print(f"| {cmd} | " + " | ".join(cells) + f" | {'; '.join(notes)} |")


if __name__ == "__main__":
    sys.exit(main())
