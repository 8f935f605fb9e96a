"""End-to-end: a real job-queue library (RQ) runs jobs through the server with a separate
worker process: enqueue, BLMOVE/BLPOP-driven dequeue, MULTI/EXEC bookkeeping, results,
failures and the failed-job registry."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

rq = pytest.importorskip("rq")

HERE = Path(__file__).resolve().parent


def run_worker(port: int, *queues: str, burst: bool = True, timeout: float = 60):
    env = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [sys.executable, "-m", "rq.cli", "worker", "--url", f"redis://127.0.0.1:{port}",
            "--worker-class", "rq.worker.SimpleWorker"]
    if burst:
        args.append("--burst")
    return subprocess.run(args + list(queues), env=env, cwd=str(HERE), capture_output=True,
                          text=True, timeout=timeout)


def test_rq_jobs_run_through_a_worker(server, r):
    from rq import Queue

    import rq_jobs

    q = Queue("default", connection=r)
    jobs = [q.enqueue(rq_jobs.add, i, i * 10) for i in range(20)]
    bad = q.enqueue(rq_jobs.fail, "boom")
    assert len(q) == 21
    w = run_worker(server.port, "default")
    assert w.returncode == 0, w.stdout + w.stderr
    for i, job in enumerate(jobs):
        job.refresh()
        assert job.get_status() == "finished"
        assert job.return_value() == i + i * 10
    bad.refresh()
    assert bad.get_status() == "failed"
    assert bad.id in q.failed_job_registry.get_job_ids()
    assert len(q) == 0


def test_rq_worker_waits_for_jobs_enqueued_later(server, r):
    from rq import Queue

    import rq_jobs

    env = dict(os.environ, PYTHONPATH=str(HERE))
    worker = subprocess.Popen(
        [sys.executable, "-m", "rq.cli", "worker", "--url", f"redis://127.0.0.1:{server.port}",
         "--worker-class", "rq.worker.SimpleWorker", "late"],
        env=env, cwd=str(HERE), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.5)  # the worker is now blocked waiting on its queue
        q = Queue("late", connection=r)
        job = q.enqueue(rq_jobs.add, 2, 3)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            job.refresh()
            if job.get_status() == "finished":
                break
            time.sleep(0.1)
        assert job.get_status() == "finished"
        assert job.return_value() == 5
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
