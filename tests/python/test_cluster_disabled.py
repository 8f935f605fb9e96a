"""A single node is a server with cluster support disabled: CLUSTER, READONLY, READWRITE and
ASKING answer as redis-server does then, and cluster clients recognise it."""

import pytest
import redis
from redis.cluster import RedisCluster

DISABLED = "This instance has cluster support disabled"


@pytest.mark.parametrize("args", [
    ("CLUSTER", "INFO"),
    ("CLUSTER", "SLOTS"),
    ("CLUSTER", "SHARDS"),
    ("CLUSTER", "NODES"),
    ("CLUSTER", "MYID"),
    ("CLUSTER", "KEYSLOT", "foo"),
    ("CLUSTER", "HELP"),
    ("CLUSTER", "COUNTKEYSINSLOT", "1"),
    ("CLUSTER", "GETKEYSINSLOT", "1", "10"),
    ("CLUSTER", "RESET", "HARD"),
    ("READONLY",),
    ("READWRITE",),
    ("ASKING",),
])
def test_disabled_error(rr, args):
    with pytest.raises(redis.ResponseError, match=DISABLED):
        rr.execute_command(*args)


@pytest.mark.parametrize("args, text", [
    (("CLUSTER",), "wrong number of arguments for 'cluster' command"),
    (("CLUSTER", "FOO"), "unknown subcommand 'FOO'. Try CLUSTER HELP."),
    (("CLUSTER", "KEYSLOT"), "wrong number of arguments for 'cluster|keyslot' command"),
    (("READONLY", "x"), "wrong number of arguments for 'readonly' command"),
])
def test_arity_and_unknown_subcommands_first(rr, args, text):
    with pytest.raises(redis.ResponseError) as e:
        rr.execute_command(*args)
    assert str(e.value) == text


def test_command_info(rr):
    info = rr.execute_command("COMMAND", "INFO", "asking", "readonly")
    assert info[0][:3] == [b"asking", 1, [b"fast"]]
    assert info[1][:3] == [b"readonly", 1, [b"loading", b"stale", b"fast"]]
    assert info[1][6] == [b"@fast", b"@connection"]


def test_redis_py_cluster_client_sees_a_non_cluster_node(server):
    with pytest.raises(redis.RedisClusterException, match="Cluster mode is not enabled"):
        RedisCluster(host=server.host, port=server.port)
