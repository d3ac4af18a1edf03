"""``Queue(wait_replicas=...)`` on a server without replicas: the add is kept and refused loudly.

With replicas (the Sentinel rig) the same option is checked in tests/topology/test_replication_wait.py.
"""

from __future__ import annotations

import pytest
import redis

from echomq import InvalidInputError, Queue, ReplicationError


def test_an_add_no_replica_acknowledged_raises_and_the_job_stays(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, wait_replicas=1, wait_timeout_ms=50)
    with pytest.raises(ReplicationError) as caught:
        queue.add("email", {"to": "a@example.com"}, job_id="welcome-1")
    error = caught.value
    assert (error.job_ids, error.acknowledged, error.required, error.timeout_ms) == (("welcome-1",), 0, 1, 50)
    assert "'welcome-1'" in str(error) and "0 of 1 replica(s)" in str(error)
    job = queue.get_job("welcome-1")
    assert job is not None and job.data == {"to": "a@example.com"}
    assert queue.get_job_counts("waiting")["waiting"] == 1


def test_a_bulk_names_every_job_it_could_not_confirm(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, wait_replicas=2, wait_timeout_ms=20)
    with pytest.raises(ReplicationError) as caught:
        queue.add_bulk([{"name": "n", "data": {"i": i}} for i in range(7)])
    assert caught.value.job_ids == tuple(str(i) for i in range(1, 8))
    assert "and 2 more" in str(caught.value)
    assert queue.get_job_counts("waiting")["waiting"] == 7


def test_a_flow_is_confirmed_by_its_root(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name, wait_replicas=1, wait_timeout_ms=20)
    with pytest.raises(ReplicationError) as caught:
        queue.add_flow({"name": "parent", "opts": {"job_id": "root"}}, [{"name": "child"}])
    assert caught.value.job_ids == ("root",)
    assert queue.get_job_counts("waiting-children", "waiting") == {"waiting-children": 1, "waiting": 1}


def test_without_the_option_nothing_waits(connection: redis.Redis, queue_name: str) -> None:
    queue = Queue(connection, queue_name)
    assert queue.wait_replicas == 0
    assert queue.add("n").id == "1"


@pytest.mark.parametrize(("options", "named"), [
    ({"wait_replicas": -1}, "wait_replicas=-1"),
    ({"wait_replicas": True}, "wait_replicas=True"),
    ({"wait_replicas": "1"}, "wait_replicas='1'"),
    ({"wait_replicas": 1, "wait_timeout_ms": 0}, "wait_timeout_ms=0"),
    ({"wait_replicas": 1, "wait_timeout_ms": 1.5}, "wait_timeout_ms=1.5"),
])
def test_bad_replica_options_are_refused_by_name(connection: redis.Redis, queue_name: str,
                                                 options: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidInputError, match=named.replace("(", r"\(")):
        Queue(connection, queue_name, **options)  # type: ignore[arg-type]
    assert connection.keys(f"emq:{{{queue_name}}}:*") == []
