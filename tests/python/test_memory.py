"""MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP and the maxmemory
directives: reply shapes and error texts, compared with redis-server 7.0 where the shapes
are meant to match."""

import time

import pytest
import redis

from helpers import IS_EMBER, IS_REDIS, RespError, reference_redis

OOM = "command not allowed when used memory > 'maxmemory'."


def text(reply):
    """A raw reply from the reference server as redis-py shows it (errors without the
    ERR prefix, which redis-py strips)."""
    if isinstance(reply, RespError):
        return reply.message.removeprefix("ERR ")
    return reply


def test_usage_shapes_and_errors(r):
    r.set("key:1", "0123456789abcdef")
    n = r.memory_usage("key:1")
    # Slot (key pointer + entry + control byte), key and value allocations: within a
    # small factor of redis-server's 80 bytes for the same key.
    assert 40 <= n <= 160
    assert r.memory_usage("nokey") is None
    r.rpush("l", *[str(i) for i in range(100)])
    r.hset("h", mapping={f"f{i}": "v" * 10 for i in range(100)})
    assert r.memory_usage("l") > r.memory_usage("key:1")
    assert r.memory_usage("h") > 100 * 12, "a hash holds its fields and values"
    assert r.execute_command("MEMORY", "USAGE", "h", "SAMPLES", "0") == r.memory_usage("h")
    big = r.memory_usage("key:1")
    r.set("key:2", "x" * 10_000)
    assert r.memory_usage("key:2") >= 10_000 > big
    r.expire("key:1", 100)
    assert r.memory_usage("key:1") > big, "the expiry index entry counts"
    for args, text in [
        (("USAGE", "key:1", "SAMPLES", "-1"), "syntax error"),
        (("USAGE", "key:1", "SAMPLES", "x"), "value is not an integer or out of range"),
        (("USAGE", "key:1", "FOO"), "syntax error"),
        (("USAGE", "key:1", "SAMPLES"), "syntax error"),
        (("USAGE",), "wrong number of arguments for 'memory|usage' command"),
        (("FOO",), "unknown subcommand 'FOO'. Try MEMORY HELP."),
    ]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("MEMORY", *args)
        assert str(e.value) == text, args


def test_usage_errors_match_redis(r):
    cases = [
        ("MEMORY", "USAGE", "nokey"),
        ("MEMORY", "USAGE", "k", "SAMPLES", "-1"),
        ("MEMORY", "USAGE", "k", "SAMPLES", "x"),
        ("MEMORY", "USAGE", "k", "BAR"),
        ("MEMORY", "NOPE"),
        ("MEMORY",),
    ]
    with reference_redis() as ref:
        for c in cases:
            want = text(ref.cmd(*c))
            try:
                got = r.execute_command(*c)
            except redis.ResponseError as e:
                got = str(e)
            assert got == want, c


def test_stats_fields(r):
    r.set("a", "1")
    r.set("b", "2", ex=100)
    st = r.memory_stats()
    with reference_redis() as ref:
        ref.cmd("SET", "a", "1")
        want = ref.cmd("MEMORY", "STATS")
    names = {k.decode() if isinstance(k, bytes) else k for k in want[0::2]}
    # Every field Ember reports is one of Redis's names (db.N aside), and the main ones
    # are all there.
    for k in st:
        assert k in names or k.startswith("db."), k
    for k in ["peak.allocated", "total.allocated", "startup.allocated", "overhead.total",
              "keys.count", "keys.bytes-per-key", "dataset.bytes", "dataset.percentage",
              "allocator.allocated", "allocator.resident", "fragmentation",
              "fragmentation.bytes"]:
        assert k in st, k
    assert st["keys.count"] == 2
    assert r.ping(), "the reply had exactly the fields it announced"
    assert st["total.allocated"] >= st["startup.allocated"] > 0
    assert st["peak.allocated"] >= st["total.allocated"]
    db0 = st["db.0"]
    assert db0["overhead.hashtable.main"] > 0 and db0["overhead.hashtable.expires"] > 0


def test_doctor_help_malloc_stats_purge(r):
    doc = r.execute_command("MEMORY", "DOCTOR")
    doc = doc.decode() if isinstance(doc, bytes) else doc
    assert doc.startswith("Hi Sam") or doc.startswith("Sam, I detected")
    help_lines = r.execute_command("MEMORY", "HELP")
    with reference_redis() as ref:
        want = ref.cmd("MEMORY", "HELP")
    assert [x.decode() if isinstance(x, bytes) else x for x in help_lines] == want
    text = r.execute_command("MEMORY", "MALLOC-STATS")
    text = text.decode() if isinstance(text, bytes) else text
    assert "jemalloc statistics" in text
    assert r.execute_command("MEMORY", "PURGE") in (True, b"OK", "OK")


def test_maxmemory_config(r):
    try:
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        assert r.config_get("maxmemory-samples") == {"maxmemory-samples": "5"}
        assert r.config_get("maxmemory-eviction-tenacity") == {"maxmemory-eviction-tenacity": "10"}
        assert r.config_get("lfu-log-factor") == {"lfu-log-factor": "10"}
        assert r.config_get("lfu-decay-time") == {"lfu-decay-time": "1"}
        r.config_set("maxmemory", "100mb")
        assert r.config_get("maxmemory") == {"maxmemory": str(100 << 20)}
        info = r.info("memory")
        assert info["maxmemory"] == 100 << 20
        assert info["maxmemory_human"] == "100.00M"
        r.config_set("maxmemory-policy", "ALLKEYS-LFU")
        assert r.info("memory")["maxmemory_policy"] == "allkeys-lfu"
        assert "evicted_keys" in r.info("stats")
        bad = [
            ("maxmemory-policy", "lru"),
            ("maxmemory-samples", "0"),
            ("maxmemory-eviction-tenacity", "101"),
            ("lfu-log-factor", "-1"),
            ("maxmemory", "-1"),
            ("maxmemory", "1x"),
        ]
        with reference_redis() as ref:
            for name, value in bad:
                want = text(ref.cmd("CONFIG", "SET", name, value))
                with pytest.raises(redis.ResponseError) as e:
                    r.config_set(name, value)
                assert str(e.value) == want, name
    finally:
        r.config_set("maxmemory", "0")
        r.config_set("maxmemory-policy", "noeviction")


def test_oom_reply_matches_redis(r):
    try:
        r.config_set("maxmemory", "1")
        with pytest.raises(redis.ResponseError) as e:
            r.set("x", "1")
        assert str(e.value).endswith(OOM)
        with reference_redis("--maxmemory", "1") as ref:
            want = ref.cmd("SET", "x", "1")
        assert isinstance(want, RespError) and want.message == "OOM " + OOM
        assert r.get("nokey") is None
    finally:
        r.config_set("maxmemory", "0")


def _thp_mode() -> str:
    """The kernel's THP mode (always / madvise / never), or "" when it has none."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return ""


def _proc_field(pid: int, path: str, name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _fill(srv, mib: int) -> None:
    c = srv.client()
    value = "v" * 256
    for start in range(0, mib * 4096, 10_000):
        p = c.pipeline(transaction=False)
        for i in range(start, start + 10_000):
            p.set(f"thp:{i}", value)
        p.execute()


@pytest.mark.skipif(IS_REDIS, reason="Ember's allocator options (node/src/main.rs)")
def test_allocator_options(r):
    """The ember binary's jemalloc options are in force: huge pages, free extents split
    for new slabs up to 2^16 times their size (freed list elements are reused), and
    three-page slabs for the power-of-two classes from 128 to 2048 bytes."""
    sizes = (128, 256, 512, 1024, 2048)
    # An element of each size, so each class has a row in the bins table.
    r.rpush("alloc:opts", *(b"e" * n for n in sizes + (320,)))
    text = r.execute_command("MEMORY", "MALLOC-STATS")
    text = text.decode() if isinstance(text, bytes) else text
    assert 'opt.thp: "always"' in text
    assert "opt.lg_extent_max_active_fit: 16" in text
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("bins:"))
    cols = lines[head].split()[1:]
    rows = {}
    for line in lines[head + 1 :]:
        fields = line.split()
        if fields[:1] == ["---"]:  # classes with nothing allocated, left out
            continue
        if not fields or not fields[0].isdigit():
            break
        rows[int(fields[0])] = dict(zip(cols, fields))
    for n in sizes:
        assert (int(rows[n]["pgs"]), int(rows[n]["regs"])) == (3, 3 * 4096 // n), rows[n]
    # A class between them keeps jemalloc's slab: 64 regions of 320 bytes in 5 pages.
    assert (int(rows[320]["pgs"]), int(rows[320]["regs"])) == (5, 64), rows[320]


@pytest.mark.skipif(IS_REDIS, reason="Ember's heap policy: Redis disables THP by default")
@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="kernel THP is off")
def test_transparent_huge_pages(start_server):
    """Ember's heap is in transparent huge pages by default (jemalloc thp:always, enough
    for the kernel's madvise mode); `disable-thp yes` turns them off, as in Redis."""
    on = start_server()
    assert on.client().config_get("disable-thp") == {"disable-thp": "no"}
    assert _proc_field(on.proc.pid, "status", "THP_enabled") in (None, 1)
    _fill(on, 64)
    huge = _proc_field(on.proc.pid, "smaps_rollup", "AnonHugePages")
    assert huge is not None and huge >= 16 * 1024, f"AnonHugePages {huge} kB"

    off = start_server("--disable-thp", "yes")
    assert off.client().config_get("disable-thp") == {"disable-thp": "yes"}
    assert _proc_field(off.proc.pid, "status", "THP_enabled") in (None, 0)
    _fill(off, 64)
    huge = _proc_field(off.proc.pid, "smaps_rollup", "AnonHugePages")
    # jemalloc's first extents are mapped before main() runs the prctl.
    assert huge is not None and huge <= 8 * 1024, f"AnonHugePages {huge} kB"
    with pytest.raises(redis.ResponseError):
        off.client().config_set("disable-thp", "no")


def _push_elements(c, mib: int, prefix: str = "mem:list") -> None:
    """`mib` MiB of 256-byte elements in 64 lists (`<prefix>:<n>`)."""
    value = b"e" * 256
    for start in range(0, mib * 4096, 8192):
        p = c.pipeline(transaction=False)
        for i in range(start, start + 8192, 128):
            p.rpush(f"{prefix}:{(i // 128) % 64}", *([value] * 128))
        p.execute()


@pytest.mark.skipif(IS_REDIS, reason="Ember's heap policy: Redis disables THP by default")
@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="kernel THP is off")
def test_collection_elements_in_base_pages(start_server):
    """Long list elements come from an arena of base pages (storage::arena): 128 MiB of
    256-byte elements add little to AnonHugePages (their slot blocks, about 10%, stay in
    the huge-page heap), while the same bytes as string values add most of themselves."""
    srv = start_server()
    c = srv.client()
    before = _proc_field(srv.proc.pid, "smaps_rollup", "AnonHugePages")
    _push_elements(c, 128, "list")
    assert c.llen("list:0") == 128 * 4096 // 64
    lists = _proc_field(srv.proc.pid, "smaps_rollup", "AnonHugePages") - before
    assert lists <= 40 * 1024, f"AnonHugePages grew {lists} kB for 128 MiB of list elements"
    _fill(srv, 64)
    strings = _proc_field(srv.proc.pid, "smaps_rollup", "AnonHugePages") - before - lists
    assert strings >= 16 * 1024, f"AnonHugePages grew {strings} kB for 64 MiB of strings"


def _rss_falls_below(pid: int, limit_kb: int, within_s: float) -> int:
    """Polls the RSS until it is under `limit_kb` or `within_s` passed; the last reading."""
    deadline = time.monotonic() + within_s
    while True:
        rss = _proc_field(pid, "status", "VmRSS")
        if rss < limit_kb or time.monotonic() > deadline:
            return rss
        time.sleep(0.5)


def test_memory_of_deleted_collections_goes_back_to_the_system(start_server):
    """Deleting big collections gives their memory back within seconds, as Redis does
    (jemalloc-bg-thread yes, the default: jemalloc purges freed pages from its own thread;
    without it the elements' arena kept them until something allocated there again)."""
    srv = start_server()
    c = srv.client()
    assert c.config_get("jemalloc-bg-thread") == {"jemalloc-bg-thread": "yes"}
    base = _proc_field(srv.proc.pid, "status", "VmRSS")
    _push_elements(c, 96)
    peak = _proc_field(srv.proc.pid, "status", "VmRSS")
    assert peak - base >= 96 * 1024, (base, peak)
    c.delete(*(f"mem:list:{n}" for n in range(64)))
    rss = _rss_falls_below(srv.proc.pid, base + (peak - base) // 4, 30)
    assert rss < base + (peak - base) // 4, f"RSS {rss} kB after the deletes (base {base}, peak {peak})"

    if IS_REDIS:
        return
    # The same with the background thread off: the freed pages stay.
    c.config_set("jemalloc-bg-thread", "no")
    _push_elements(c, 96)
    peak = _proc_field(srv.proc.pid, "status", "VmRSS")
    c.delete(*(f"mem:list:{n}" for n in range(64)))
    time.sleep(12)  # jemalloc's dirty decay time is 10 s
    kept = _proc_field(srv.proc.pid, "status", "VmRSS")
    assert kept > base + (peak - base) // 2, f"RSS {kept} kB, peak {peak}: purged without the thread"
    c.config_set("jemalloc-bg-thread", "yes")
    rss = _rss_falls_below(srv.proc.pid, base + (peak - base) // 4, 30)
    assert rss < base + (peak - base) // 4, f"RSS {rss} kB after the thread came back"


@pytest.mark.parametrize("policy", ["allkeys-lru", "noeviction"])
def test_a_scripts_heap_never_evicts_the_dataset(start_server, policy):
    """Issue 34: one script that builds a big table used to leave its garbage counted in
    used_memory, so the next writes evicted the whole dataset (allkeys-lru) or were all
    refused with -OOM (noeviction). The Lua heap is not data: it stays out of used_memory
    (reported as used_memory_vm_eval), and the script's garbage is collected after it."""
    srv = start_server("--maxmemory", "60mb", "--maxmemory-policy", policy)
    c = srv.client()
    value = "v" * 1000
    for start in range(0, 20_000, 5_000):
        p = c.pipeline(transaction=False)
        for i in range(start, start + 5_000):
            p.set(f"data:{i}", value)
        p.execute()
    assert c.dbsize() == 20_000
    before = c.info("memory")["used_memory"]
    # A heap of ~128 MB (an 8M-slot array), twice maxmemory, garbage once it returns.
    assert c.eval("local t = {} for i = 1, 5e6 do t[i] = i end return #t", 0) == 5_000_000
    mem = c.info("memory")
    assert mem["used_memory"] < before + (16 << 20), (before, mem["used_memory"])
    assert mem["used_memory"] <= mem["maxmemory"]
    if IS_EMBER:
        # Ember also collects the script's garbage right after it (Redis keeps it until
        # Lua's own collector comes round).
        assert 0 < mem["used_memory_vm_eval"] < (8 << 20), mem["used_memory_vm_eval"]
    assert mem["used_memory_lua"] == mem["used_memory_vm_eval"]
    assert mem["used_memory_vm_total"] >= mem["used_memory_vm_eval"]
    # Writes after it: none refused, nothing evicted.
    p = c.pipeline(transaction=False)
    for i in range(2_000):
        p.set(f"after:{i}", "x" * 100)
    assert all(r is True for r in p.execute())
    assert c.dbsize() == 22_000
    assert c.info("stats")["evicted_keys"] == 0
    # While the script runs its heap is left out too: a write it makes after growing the
    # heap past maxmemory neither evicts nor is refused.
    script = "local t = {} for i = 1, 5e6 do t[i] = i end return redis.call('set', KEYS[1], #t)"
    assert c.eval(script, 1, "during") == b"OK"
    assert c.get("during") == b"5000000"
    assert c.dbsize() == 22_001
    assert c.info("stats")["evicted_keys"] == 0
