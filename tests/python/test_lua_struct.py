"""The Lua `struct` library (struct.pack / unpack / size) against redis-server: the same
scripts give the same replies and the same error messages."""

from __future__ import annotations

import re
import shutil

import pytest

from helpers import RespError, _redis_server_bin, reference_redis

pytestmark = pytest.mark.skipif(shutil.which(_redis_server_bin()) is None,
                                reason="redis-server not installed")

SCRIPTS = [
    "return struct.pack('>I2', 258)",
    "return struct.pack('<I2', 258)",
    "return struct.pack('b', -1)",
    "return struct.pack('>i3', -2)",
    "return struct.pack('>l', 1)",
    "return struct.pack('bI', 1, 2)",
    "return struct.pack('!4bI', 1, 2)",
    "return struct.pack('!bd', 1, 2.5)",
    "return struct.pack('s', 'ab')",
    "return struct.pack('c3', 'abcd')",
    "return struct.pack('c0', 'abcd')",
    "return struct.pack('xb', 5)",
    "return struct.pack('>f', 0.25)",
    "return struct.pack('<d', -1.5)",
    "return struct.pack('>i16', -1)",
    "return struct.pack('<I', '42')",
    "return {struct.unpack('>I2i2', struct.pack('>I2i2', 65535, -3))}",
    "return {struct.unpack('s', 'hi\\0rest')}",
    "return {struct.unpack('B', 'abc', 2)}",
    "return {struct.unpack('Bc0', struct.pack('Bc0', 3, 'xyz'))}",
    "return {struct.unpack('xB', 'ab')}",
    "return {struct.unpack('!4bI', struct.pack('!4bI', -7, 123456))}",
    "return tostring(struct.unpack('>d', struct.pack('>d', 1.25)))",
    "return {struct.unpack('<i8', struct.pack('<i8', -123456789))}",
    "return struct.size('!4bI')",
    "return struct.size('!bd')",
    "return struct.size('>hHlLT')",
    "return struct.size('c10 i3')",
    # Errors.
    "return struct.pack('q', 1)",
    "return struct.pack('i33', 1)",
    "return struct.pack('!3b', 1)",
    "return struct.pack('c5', 'ab')",
    "return struct.pack('I')",
    "return struct.unpack('I', 'ab')",
    "return struct.unpack('s', 'ab')",
    "return struct.unpack('c0', 'ab')",
    "return struct.unpack('B', 'ab', 0)",
    "return struct.size('s')",
    "return struct.size('c0')",
    "struct.newglobal = 1",
]


def _norm(v):
    """The part of a script error that the library wrote (Redis and Ember frame it
    differently: `user_script:1:` prefixes and `script: <sha>` suffixes)."""
    if isinstance(v, RespError):
        m = v.message
        m = re.sub(r" script: .*$", "", m)
        m = re.sub(r"^ERR (user_script:\d+: )?", "", m)
        m = re.sub(r"^Error running script .*?: ", "", m)
        m = re.sub(r"@user_script:\d+: ", "", m)
        return ("error", m)
    return v


def test_struct_matches_redis(raw):
    ours = raw()
    with reference_redis() as ref:
        for script in SCRIPTS:
            a = _norm(ours.cmd("EVAL", script, "0"))
            b = _norm(ref.cmd("EVAL", script, "0"))
            assert a == b, f"{script}: ember={a!r} redis={b!r}"
