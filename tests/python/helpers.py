"""Shared helpers for the Ember Python compatibility suite.

Nothing in here is a pytest fixture; conftest.py wires these into fixtures and
test modules import the constants/markers directly (``from helpers import ...``).

Which server is under test
--------------------------
* ``EMBER_SERVER=redis``  -> a real ``redis-server`` (``REDIS_SERVER_BIN``, default
  ``redis-server`` from PATH) started as
  ``redis-server --port P --bind 127.0.0.1 --save '' --appendonly no``.
  This is how the suite itself is validated.
* otherwise (default)     -> the Ember binary, started as
  ``EMBER_BIN --port P --bind 127.0.0.1``.  The binary is looked up in this order:

    1. ``$EMBER_BIN``
    2. ``<repo>/target/release/ember``
    3. ``$CARGO_TARGET_DIR/release/ember`` (if ``CARGO_TARGET_DIR`` is set)
    4. ``/work/target/release/ember``
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

SERVER_KIND = "redis" if os.environ.get("EMBER_SERVER", "").lower() == "redis" else "ember"
IS_REDIS = SERVER_KIND == "redis"
IS_EMBER = not IS_REDIS

START_TIMEOUT = float(os.environ.get("EMBER_START_TIMEOUT", "20"))


def _redis_server_bin() -> str:
    return os.environ.get("REDIS_SERVER_BIN", "redis-server")


def _redis_version() -> tuple[int, ...] | None:
    if not IS_REDIS:
        return None
    try:
        out = subprocess.run([_redis_server_bin(), "--version"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else None


REDIS_VERSION = _redis_version()
# True only when the server under test is a real redis-server older than 7.2.
# Ember targets the Redis 7.2 behaviour, so 7.2-only tests run against Ember.
IS_REDIS_70 = bool(IS_REDIS and REDIS_VERSION and REDIS_VERSION < (7, 2, 0))

requires_72 = pytest.mark.skipif(IS_REDIS_70, reason="behaviour introduced in Redis 7.2; "
                                 "server under test is redis-server < 7.2")
ember_only = pytest.mark.skipif(IS_REDIS, reason="Ember-only extension command")


def find_ember_bin() -> Path:
    """Resolve the Ember binary (see module docstring for the lookup order)."""
    env = os.environ.get("EMBER_BIN")
    if env:
        return Path(env)
    candidates = [REPO_ROOT / "target" / "release" / "ember"]
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "ember")
    candidates.append(Path("/work/target/release/ember"))
    for c in candidates:
        if c.is_file():
            return c
    raise RuntimeError(
        "Ember binary not found; set EMBER_BIN or build it (looked in: "
        + ", ".join(str(c) for c in candidates)
        + "). Use EMBER_SERVER=redis to run the suite against redis-server."
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def make_client(port: int, *, protocol: int = 2, raw: bool = False, **kw) -> redis.Redis:
    """A redis-py client without automatic retries.

    raw=True clears redis-py's response callbacks, so replies come back as the
    server sent them (b'OK' instead of True, bulk strings instead of floats,
    flat lists instead of dicts in RESP2, ...).
    """
    kw.setdefault("socket_timeout", 30)
    kw.setdefault("socket_connect_timeout", 10)
    c = redis.Redis(host=HOST, port=port, protocol=protocol, decode_responses=False,
                    retry=Retry(NoBackoff(), 0), **kw)
    if raw:
        c.response_callbacks.clear()
    return c


class ServerProcess:
    """A server under test running as a child process."""

    def __init__(self, extra_args=(), config_file: str | os.PathLike | None = None,
                 password: str | None = None):
        self.extra_args = [str(a) for a in extra_args]
        self.config_file = str(config_file) if config_file else None
        self.password = password
        self.port = free_port()
        self.host = HOST
        self.proc: subprocess.Popen | None = None
        self.workdir = tempfile.mkdtemp(prefix=f"ember-test-{SERVER_KIND}-")
        self.log_path = os.path.join(self.workdir, "server.log")
        self._log = None

    # -- lifecycle ---------------------------------------------------------
    def command_line(self) -> list[str]:
        pre = [self.config_file] if self.config_file else []
        if IS_REDIS:
            return [_redis_server_bin(), *pre, "--port", str(self.port), "--bind", HOST,
                    "--save", "", "--appendonly", "no", "--dir", self.workdir,
                    *self.extra_args]
        return [str(find_ember_bin()), *pre, "--port", str(self.port), "--bind", HOST,
                *self.extra_args]

    def start(self) -> "ServerProcess":
        argv = self.command_line()
        self._log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir)
        except OSError as e:
            raise RuntimeError(f"could not start {argv!r}: {e}") from e
        deadline = time.monotonic() + START_TIMEOUT
        last_err = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with status {self.proc.returncode} during startup\n"
                    f"command: {argv!r}\n--- server output ---\n{self.output()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    s.settimeout(2)
                    data = s.recv(100)
                    # -NOAUTH means it is alive but password protected.
                    if data.startswith(b"+PONG") or data.startswith(b"-NOAUTH"):
                        return self
                    last_err = f"unexpected PING reply {data!r}"
            except OSError as e:
                last_err = repr(e)
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"server did not answer PING within {START_TIMEOUT}s ({last_err})\n"
            f"command: {argv!r}\n--- server output ---\n{self.output()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def output(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-20000:].decode("utf-8", "replace")
        except OSError:
            return "<no output>"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- clients -----------------------------------------------------------
    def client(self, **kw) -> redis.Redis:
        if self.password is not None:
            kw.setdefault("password", self.password)
        return make_client(self.port, **kw)

    def raw(self, timeout: float = 10.0) -> "RawConn":
        return RawConn(self.port, timeout=timeout)


# ---------------------------------------------------------------------------
# Raw RESP socket
# ---------------------------------------------------------------------------

class RespError:
    """An error reply read from a raw socket (returned, never raised)."""

    def __init__(self, message: str):
        self.message = message

    def __eq__(self, other):
        return isinstance(other, RespError) and other.message == self.message

    def __repr__(self):
        return f"RespError({self.message!r})"


class Double(float):
    """A RESP3 double (',')."""


class Push(list):
    """A RESP3 push ('>')."""


class RespSet(list):
    """A RESP3 set ('~'), kept in wire order."""


class Verbatim(bytes):
    """A RESP3 verbatim string ('='); value excludes the 'txt:' prefix."""


class BigNumber(int):
    """A RESP3 big number ('(')."""


def encode(*args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class ConnectionClosed(Exception):
    pass


class RawConn:
    """A plain TCP connection speaking RESP by hand."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending -------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_cmd(self, *args) -> None:
        self.send(encode(*args))

    def cmd(self, *args):
        """Send one command and return its parsed reply."""
        self.send_cmd(*args)
        return self.read_reply()

    # -- receiving -----------------------------------------------------------
    def _fill(self) -> None:
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            raise ConnectionClosed("connection closed by server")
        self.buf += data

    def _line(self, pos: int) -> tuple[bytes, int]:
        while True:
            idx = self.buf.find(b"\r\n", pos)
            if idx >= 0:
                return bytes(self.buf[pos:idx]), idx + 2
            self._fill()

    def _need(self, end: int) -> None:
        while len(self.buf) < end:
            self._fill()

    def _parse(self, pos: int):
        self._need(pos + 1)
        t = chr(self.buf[pos])
        line, pos = self._line(pos + 1)
        if t == "+":
            return line.decode(), pos
        if t == "-":
            return RespError(line.decode("utf-8", "replace")), pos
        if t == ":":
            return int(line), pos
        if t == "(":
            return BigNumber(int(line)), pos
        if t == ",":
            return Double(float(line.decode())), pos
        if t == "#":
            return line == b"t", pos
        if t == "_":
            return None, pos
        if t in "$=!":
            n = int(line)
            if n < 0:
                return None, pos
            self._need(pos + n + 2)
            data = bytes(self.buf[pos:pos + n])
            if self.buf[pos + n:pos + n + 2] != b"\r\n":
                raise AssertionError(f"bulk string not terminated by CRLF: {bytes(self.buf[pos:pos+n+2])!r}")
            pos += n + 2
            if t == "=":
                return Verbatim(data[4:]), pos
            if t == "!":
                return RespError(data.decode("utf-8", "replace")), pos
            return data, pos
        if t in "*~>":
            n = int(line)
            if n < 0:
                return None, pos
            items = []
            for _ in range(n):
                v, pos = self._parse(pos)
                items.append(v)
            if t == "~":
                return RespSet(items), pos
            if t == ">":
                return Push(items), pos
            return items, pos
        if t == "%" or t == "|":
            n = int(line)
            d = {}
            for _ in range(n):
                k, pos = self._parse(pos)
                v, pos = self._parse(pos)
                if isinstance(k, list):
                    k = tuple(k)
                d[k] = v
            return d, pos
        raise AssertionError(f"unknown RESP type byte {t!r} in {bytes(self.buf[:200])!r}")

    def read_frame(self):
        """Read one reply; return (parsed_value, raw_bytes_of_the_reply)."""
        value, end = self._parse(0)
        raw = bytes(self.buf[:end])
        del self.buf[:end]
        return value, raw

    def read_reply(self):
        return self.read_frame()[0]

    def read_raw(self) -> bytes:
        return self.read_frame()[1]

    def read_exactly(self, n: int) -> bytes:
        self._need(n)
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def read_available(self, wait: float = 0.3) -> bytes:
        """Whatever arrives within `wait` seconds (b'' if nothing); keeps the connection."""
        old = self.sock.gettimeout()
        self.sock.settimeout(wait)
        try:
            while True:
                try:
                    data = self.sock.recv(1 << 20)
                except socket.timeout:
                    break
                if not data:
                    break
                self.buf += data
        finally:
            self.sock.settimeout(old)
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection within `timeout` seconds.

        Any data still in flight is drained (and kept in self.buf).
        """
        deadline = time.monotonic() + timeout
        old = self.sock.gettimeout()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.sock.settimeout(left)
                try:
                    data = self.sock.recv(65536)
                except socket.timeout:
                    return False
                except (ConnectionResetError, BrokenPipeError):
                    return True
                if not data:
                    return True
                self.buf += data
        finally:
            try:
                self.sock.settimeout(old)
            except OSError:
                pass


def in_thread(call, out: dict) -> threading.Thread:
    """Runs `call` (an endless script, say) in a started thread; the error reply that ends
    it lands in `out["err"]`."""
    def run():
        try:
            call()
        except redis.ResponseError as e:
            out["err"] = str(e)

    th = threading.Thread(target=run)
    th.start()
    return th


def wait_until(pred, timeout: float = 10.0, interval: float = 0.01, msg: str = "condition"):
    """Poll `pred` until truthy; returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {msg}")
        time.sleep(interval)


def parse_info(text: bytes | str) -> dict[str, dict[str, str]]:
    """Parse an INFO reply into {section_lower: {field: value}} (values kept as str)."""
    if isinstance(text, bytes):
        text = text.decode()
    sections: dict[str, dict[str, str]] = {}
    cur = None
    for line in text.split("\r\n"):
        if not line:
            continue
        if line.startswith("# "):
            cur = sections.setdefault(line[2:].strip().lower(), {})
            continue
        assert cur is not None, f"INFO field before any section header: {line!r}"
        k, _, v = line.partition(":")
        cur[k] = v
    return sections


def parse_kv(value: str, sep: str = ",") -> dict[str, str]:
    """'keys=1,expires=0,avg_ttl=0' -> {'keys': '1', ...}"""
    return dict(item.split("=", 1) for item in value.split(sep) if item)


def parse_client_line(line: bytes | str) -> dict[str, str]:
    if isinstance(line, bytes):
        line = line.decode()
    out = {}
    for tok in line.strip().split(" "):
        k, _, v = tok.partition("=")
        out[k] = v
    return out


class reference_redis:
    """A private redis-server for differential tests: ``with reference_redis() as ref:``
    gives a RawConn to it and stops it (and removes its directory) afterwards."""

    def __init__(self, *extra_args: str):
        self.extra = list(extra_args)

    def __enter__(self) -> "RawConn":
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix="ember-ref-")
        self.proc = subprocess.Popen(
            [_redis_server_bin(), "--port", str(self.port), "--bind", HOST, "--save", "",
             "--appendonly", "no", "--dir", self.workdir, *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.conn = RawConn(self.port)
                return self.conn
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.__exit__(None, None, None)
                    raise
                time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


class Proc:
    """A private server (ember or redis-server) with `workdir` as its directory, started
    with `--save ''` and `extra` (the AOF tests: test_aof.py, test_digest.py)."""

    def __init__(self, kind: str, workdir: str, *extra: str):
        self.kind, self.workdir = kind, workdir
        self.port = free_port()
        binary = str(find_ember_bin()) if kind == "ember" else _redis_server_bin()
        argv = [binary, "--port", str(self.port), "--bind", HOST, "--save", "",
                "--dir", workdir, *extra]
        self.log = open(os.path.join(workdir, f"{kind}.log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=workdir)
        deadline = time.monotonic() + 30
        while True:
            try:
                c = self.client()
                c.ping()
                c.close()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{kind} exited during start-up: {self.output()}")
                assert time.monotonic() < deadline, self.output()
                time.sleep(0.05)

    def output(self) -> str:
        with open(os.path.join(self.workdir, f"{self.kind}.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, decode_responses=True,
                           encoding_errors="backslashreplace")

    def shutdown(self) -> None:
        try:
            self.client().shutdown(nosave=True)
        except redis.ConnectionError:
            pass
        self.proc.wait(timeout=20)
        self.log.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=20)
        self.log.close()


def wait_rewrite(c: redis.Redis) -> None:
    """Waits until no AOF rewrite is in progress or scheduled."""
    deadline = time.monotonic() + 30
    while True:
        i = c.info("persistence")
        if not i["aof_rewrite_in_progress"] and not i.get("aof_rewrite_scheduled"):
            return
        assert time.monotonic() < deadline, i
        time.sleep(0.05)
