"""The bench harness (tests/bench) at tiny sizes, so a broken ``make bench`` shows in ``make test``.

Only what runs without the bench's own prerequisites (Node for BullMQ, .venv-bench for the Python
peers): EchoMQ's side of each bench, the round-trip loop, the CPU load, the scale curves and the
first-to-last rate marks, each on real Redis and on fakeredis. The figures are not checked, only
that every measurement finishes, yields a time, and leaves no key behind.
"""

from __future__ import annotations

import resource
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_bulk
import bench_peers
import bench_scale
import bench_worker
import pool_marks


def leftover(client: redis.Redis, fragment: str) -> list[bytes]:
    return list(client.scan_iter(match=f"*{fragment}*", count=1000))


def test_round_trips_counts_pings_per_second(connection: redis.Redis) -> None:
    assert bench_worker.round_trips(connection, seconds=0.05) > 100
    assert bench_worker.raw_round_trips(connection, seconds=0.05) > 100
    assert connection.ping()  # the connection went back to the pool in a usable state


def test_the_worker_bench_runs_every_job_and_deletes_its_queue(connection: redis.Redis, queue_name: str) -> None:
    assert bench_worker.run_echomq(connection, 20, 2, name=queue_name) > 0
    assert leftover(connection, queue_name) == []


def test_one_core_busy_spins_a_process_while_the_body_runs_and_stops_it() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    with bench_worker.one_core_busy():
        time.sleep(0.3)
    # RUSAGE_CHILDREN counts a child once it has been waited for: it spun, and it is gone.
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before > 0.05


def test_the_first_to_last_rate_leaves_out_the_time_before_the_first_job(connection: redis.Redis) -> None:
    key = "bench-smoke-marks"
    try:
        pool_marks.finished(connection, key, 3)
        time.sleep(0.05)
        pool_marks.finished(connection, key, 3)
        pool_marks.finished(connection, key, 3)
        rate = pool_marks.jobs_per_second(connection, key, 3)
    finally:
        connection.delete(key, f"{key}:first", f"{key}:last")
    assert 0 < rate < 2 / 0.05  # two jobs after the first, at least 50 ms later


@pytest.mark.parametrize("backend_url", ["real", "fake"])
def test_the_peers_bench_runs_the_echomq_worker_command(request: pytest.FixtureRequest, backend_url: str) -> None:
    url = request.getfixturevalue("redis_url" if backend_url == "real" else "fake_redis_url")
    client = redis.Redis.from_url(url)
    name = f"bench-smoke-peer-{uuid.uuid4().hex[:8]}"  # not the bench's own names: it may run meanwhile
    try:
        assert bench_peers.run(client, url, "echomq", 2, 20, name=name) > 0
        assert leftover(client, name) == []
    finally:
        client.close()


def test_the_scale_curves_measure_every_size_and_delete_their_keys(connection: redis.Redis, backend: str) -> None:
    # Keys of this prefix already there (a bench killed half-way on this shared server) are not this run's.
    before = set(leftover(connection, "bench-scale-"))
    waiting = bench_scale.waiting_curve(connection, (10, 30), k=5, repeats=1)
    schedulers = bench_scale.scheduler_curve(connection, (3, 6), repeats=1)
    events = bench_scale.events_curve(connection, (10, 20), repeats=1)
    for curves in (waiting, schedulers, events):
        for points in curves.values():
            assert [p.size for p in points] == [points[0].size, points[1].size]
            assert all(p.us_per_item > 0 for p in points)
    in_redis = {"add, in Redis", "process c1, in Redis"} if backend == "real" else set()  # fakeredis: no INFO
    assert set(waiting) == {"add", "add_bulk", "process c1", "process c10", *in_redis}
    assert set(leftover(connection, "bench-scale-")) - before == set()


def test_memory_per_job_is_measured_where_the_server_reports_it(connection: redis.Redis, backend: str) -> None:
    before = set(leftover(connection, "bench-scale-mem-"))
    memory = bench_scale.echomq_memory(connection, 20)
    if backend == "fake":  # fakeredis has neither INFO nor MEMORY: the bench prints n/a
        assert memory == bench_scale.Memory(None, None, None)
    else:  # the used_memory delta moves with whatever else the shared server does; the keys do not
        assert memory.used_memory_per_job is not None
        assert memory.hash_per_job is not None and memory.hash_per_job > 50
        assert memory.keys_per_job is not None and memory.keys_per_job > memory.hash_per_job
    assert set(leftover(connection, "bench-scale-mem-")) - before == set()


def test_the_bulk_bench_moves_every_job_and_deletes_its_queues(connection: redis.Redis) -> None:
    rows = bench_bulk.run_size(connection, 250, 100)
    assert (rows["retry_jobs"]["result"], rows["promote_jobs"]["result"]) == (250, 250)
    assert rows["retry_jobs"]["calls"] == 3 and rows["list_queues"]["result"] >= bench_bulk.OTHER_QUEUES
    assert leftover(connection, "bench-bulk-") == []
