"""Job functions for the RQ end-to-end test (imported by the worker process)."""


def add(a, b):
    return a + b


def fail(msg):
    raise ValueError(msg)
