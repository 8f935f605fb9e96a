"""Fixtures for the Ember Python compatibility suite.

Run against Ember (binary lookup documented in helpers.py):
    python3 -m pytest tests/python -q
    EMBER_BIN=/path/to/ember python3 -m pytest tests/python -q
Run against a real redis-server (how the suite is validated):
    EMBER_SERVER=redis python3 -m pytest tests/python -q

Fixtures
    server        session-wide ServerProcess (port, host, client(), raw())
    r             redis.Redis(decode_responses=False), FLUSHALL before each test
    r3            same, RESP3 (protocol=3)
    rr / rr3      like r / r3 but without redis-py response callbacks: replies
                  exactly as the server sent them (b'OK', b'10.6', flat lists...)
    raw           factory: raw() -> RawConn, a hand-written RESP socket
    start_server  factory: start_server(*extra_args, config_file=None, password=None)
                  -> a second, test-private ServerProcess (stopped after the test)
    cli           cli(*args, input=None, port=None, check=True) -> stdout of `redis-cli -p P ...`
                  (check=False: a non-zero exit status is not an error)
    all_workers   Ember: every worker thread takes connections, in turn, for the test
                  (DEBUG SPREAD; at light load Ember gathers connections on one worker), so
                  tests of races between clients run them on different threads
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import (  # noqa: E402
    IS_REDIS, REDIS_VERSION, RawConn, ServerProcess, find_ember_bin,
)


def pytest_report_header(config):
    if IS_REDIS:
        v = ".".join(map(str, REDIS_VERSION)) if REDIS_VERSION else "unknown version"
        return f"server under test: redis-server {v} (EMBER_SERVER=redis)"
    try:
        return f"server under test: ember ({find_ember_bin()})"
    except RuntimeError as e:
        return f"server under test: ember (NOT FOUND: {e})"


@pytest.fixture(scope="session")
def server():
    srv = ServerProcess()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def r(server):
    c = server.client()
    try:
        c.flushall()
    except redis.ResponseError as e:
        # Lets a half-built server run the families it already has; any test that
        # needs a clean keyspace will then fail on its own assertions.
        if not str(e).startswith("unknown command"):
            raise
    yield c
    c.close()


@pytest.fixture
def all_workers(server):
    if IS_REDIS:
        yield
        return
    c = server.client()
    c.execute_command("DEBUG", "SPREAD", c.info("server")["ember_threads"])
    yield
    c.execute_command("DEBUG", "SPREAD", 0)
    c.close()


@pytest.fixture
def r3(server, r):
    c = server.client(protocol=3)
    yield c
    c.close()


@pytest.fixture
def rr(server, r):
    c = server.client(raw=True)
    yield c
    c.close()


@pytest.fixture
def rr3(server, r):
    c = server.client(protocol=3, raw=True)
    yield c
    c.close()


@pytest.fixture
def raw(server, r):
    conns = []

    def factory(timeout: float = 10.0, port: int | None = None):
        c = RawConn(port or server.port, timeout=timeout)
        conns.append(c)
        return c

    yield factory
    for c in conns:
        c.close()


@pytest.fixture
def start_server():
    servers = []

    def factory(*extra_args, config_file=None, password=None) -> ServerProcess:
        srv = ServerProcess(extra_args, config_file=config_file, password=password)
        servers.append(srv)
        srv.start()
        return srv

    yield factory
    for s in servers:
        s.stop()


REDIS_CLI = shutil.which("redis-cli")


@pytest.fixture
def cli(server, r):
    if REDIS_CLI is None:
        pytest.skip("redis-cli not installed")

    def run(*args, input: bytes | str | None = None, port: int | None = None,
            timeout: float = 30, check: bool = True) -> str:
        argv = [REDIS_CLI, "-h", server.host, "-p", str(port or server.port), *map(str, args)]
        if isinstance(input, str):
            input = input.encode()
        res = subprocess.run(argv, input=input, capture_output=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"{argv!r} exited {res.returncode}: "
                                 f"stdout={res.stdout!r} stderr={res.stderr!r}")
        return res.stdout.decode("utf-8", "replace")

    return run

