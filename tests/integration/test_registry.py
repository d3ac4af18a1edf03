"""The job registry as an application uses it: jobs declared with a decorator, enqueued by name
with their default options, run by a Worker the registry builds (routing by name), inside the
registry's job context; its client made once per process, a new one after a fork."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from echomq import InvalidInputError, InvalidJobOptionsError, JobRegistry, Queue, RegisteredJob
from echomq.protocol.keys import QueueKeys

from support.queue_keys import SCAN_COUNT
from support.workers import Running, wait_until


@pytest.fixture
def other_queue(connection: redis.Redis, queue_name: str) -> Iterator[str]:
    """A second queue next to ``queue_name``, its keys deleted afterwards."""
    name = f"{queue_name}-b"
    yield name
    keys = list(connection.scan_iter(match=f"emq:\\{{{name}\\}}:*", count=1000))
    if keys:
        connection.delete(*keys)


def test_a_registry_worker_runs_every_job_name_of_its_queue_and_only_that_queue(
        connection: redis.Redis, queue_name: str, other_queue: str) -> None:
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name)
    def email(job: Any) -> str:
        return f"sent to {job.data['to']}"

    @registry.job("report", queue=queue_name, attempts=2)
    def build_report(job: Any) -> dict[str, Any]:
        return {"rows": job.data["rows"]}

    @registry.job(queue=other_queue)
    def cleanup(job: Any) -> None:
        raise AssertionError("not this worker's queue")

    assert registry.queues == (queue_name, other_queue)
    assert sorted(registry.processors(queue_name)) == ["email", "report"]
    sent, report = email.enqueue(to="a@b.c"), build_report.enqueue(rows=3)
    other = cleanup.enqueue()
    with Running(registry.worker(queue_name, drain_delay=0.2)):
        assert wait_until(lambda: connection.zcard(QueueKeys(queue_name).completed) == 2)
    queue = registry.queue(queue_name)
    assert queue.get_job(sent.id).return_value == "sent to a@b.c"  # type: ignore[union-attr]
    assert queue.get_job(report.id).return_value == {"rows": 3}  # type: ignore[union-attr]
    assert registry.queue(other_queue).get_job(other.id).get_state() == "waiting"  # type: ignore[union-attr]


def test_enqueue_stores_the_name_the_keyword_data_and_the_default_options(connection: redis.Redis,
                                                                           queue_name: str) -> None:
    registry = JobRegistry(connection)

    @registry.job("send-email", queue=queue_name, attempts=3, backoff={"type": "exponential", "delay": 1000},
                  priority=5)
    def send_email(job: Any) -> None: ...

    job = send_email.enqueue(to="a@b.c", template="welcome")
    stored = Queue(connection, queue_name).get_job(job.id)
    assert stored is not None
    assert stored.name == "send-email"
    assert stored.data == {"to": "a@b.c", "template": "welcome"}
    assert stored.opts["attempts"] == 3 and stored.opts["priority"] == 5
    assert stored.opts["backoff"] == {"type": "exponential", "delay": 1000}
    assert stored.get_state() == "prioritized"
    assert send_email.enqueue().data == {}  # no keyword arguments: an empty object, as BullMQ's default


def test_enqueue_with_puts_per_call_options_over_the_defaults(connection: redis.Redis, queue_name: str) -> None:
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name, attempts=3, priority=5)
    def report(job: Any) -> None: ...

    job = report.enqueue_with({"delay": 60_000, "priority": 1, "job_id": "report-2024"}, day="2024-01-01")
    stored = registry.queue(queue_name).get_job("report-2024")
    assert stored is not None and job.id == "report-2024"
    assert stored.data == {"day": "2024-01-01"}
    assert (stored.opts["attempts"], stored.opts["priority"], stored.opts["delay"]) == (3, 1, 60_000)
    assert stored.get_state() == "delayed"
    assert report.options == {"attempts": 3, "priority": 5}  # the defaults stay as registered
    with pytest.raises(InvalidJobOptionsError, match=r"'report'.*must be a mapping"):
        report.enqueue_with([("delay", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidJobOptionsError, match="unknown job option"):
        report.enqueue_with({"dealy": 1})
    assert registry.queue(queue_name).get_job_counts("waiting", "delayed", "prioritized") == {
        "waiting": 0, "delayed": 1, "prioritized": 0}


def test_enqueue_on_commit_adds_through_defer_and_checks_the_data_at_once(connection: redis.Redis,
                                                                           queue_name: str) -> None:
    pending: list[Any] = []
    registry = JobRegistry(connection, defer=pending.append)  # what a transaction's on_commit does

    @registry.job(queue=queue_name)
    def email(job: Any) -> None: ...

    assert email.enqueue_on_commit(to="a@b.c") is None
    queue = registry.queue(queue_name)
    assert queue.get_job_counts("waiting") == {"waiting": 0} and len(pending) == 1  # nothing added before the "commit"
    with pytest.raises(InvalidJobOptionsError, match="not JSON-serialisable"):
        email.enqueue_on_commit(when=object())
    assert len(pending) == 1
    pending.pop()()
    [job] = queue.get_jobs("waiting")
    assert (job.name, job.data) == ("email", {"to": "a@b.c"})
    # Without a defer, the add happens at once.
    registry.defer = None
    email.enqueue_on_commit(to="b@c.d")
    assert queue.get_job_counts("waiting") == {"waiting": 2}


def test_a_registered_job_is_still_the_plain_function() -> None:
    registry = JobRegistry("redis://127.0.0.1:1/0")  # never connected: nothing here touches Redis

    @registry.job(queue="orders")
    def email(job: Any) -> str:
        """Send one email."""
        return f"to {job.data['to']}"

    class FakeJob:
        def __init__(self) -> None:
            self.data = {"to": "a@b.c"}

    assert isinstance(email, RegisteredJob)
    assert email(FakeJob()) == "to a@b.c"
    assert (email.__name__, email.__doc__, email.name, email.queue) == ("email", "Send one email.", "email", "orders")
    assert email.options == {} and email.func.__name__ == "email"


def test_bad_declarations_are_refused_naming_what_is_wrong() -> None:
    registry = JobRegistry("redis://127.0.0.1:1/0")

    @registry.job(queue="orders")
    def email(job: Any) -> None: ...

    with pytest.raises(InvalidInputError, match="'email' is registered twice for queue 'orders'"):
        registry.register(lambda job: None, name="email", queue="orders")
    registry.register(lambda job: None, name="email", queue="invoices")  # another queue: another name space
    with pytest.raises(InvalidJobOptionsError, match="job name 42: must be a str"):
        registry.job(42, queue="orders")(lambda job: None)  # type: ignore[arg-type]
    with pytest.raises(InvalidJobOptionsError, match=r"job 'report' of queue 'orders': .*attempts"):
        @registry.job("report", queue="orders", attempts=-1)
        def report(job: Any) -> None: ...
    with pytest.raises(InvalidJobOptionsError, match=r"job 'digest' of queue 'orders': .*unknown job option.*'delay'"):
        registry.job("digest", queue="orders", dealy=5)(lambda job: None)  # type: ignore[call-arg]
    with pytest.raises(InvalidInputError, match="queue name"):
        registry.job(queue="bad:name")(lambda job: None)
    with pytest.raises(InvalidInputError, match="must be callable"):
        registry.register("not a function", queue="orders")  # type: ignore[arg-type]
    assert sorted(registry.processors("orders")) == ["email"]  # nothing refused was registered
    with pytest.raises(InvalidInputError, match=r"no job is registered for queue 'nope'.*'orders', 'invoices'"):
        registry.worker("nope")
    with pytest.raises(InvalidInputError, match="must start with redis://"):
        JobRegistry("http://localhost")
    with pytest.raises(InvalidInputError, match=r"a URL, a redis\.Redis, a redis\.cluster\.RedisCluster, or a func"):
        JobRegistry(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="job_context"):
        JobRegistry(job_context="app")  # type: ignore[arg-type]


def test_the_job_context_is_entered_and_exited_around_each_job_even_a_failing_one(
        connection: redis.Redis, queue_name: str) -> None:
    seen: list[str] = []
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name)
    def works(job: Any) -> str:
        seen.append(f"run {job.name}")
        return "ok"

    @registry.job(queue=queue_name)
    def breaks(job: Any) -> None:
        seen.append(f"run {job.name}")
        raise ValueError("broken")

    @contextlib.contextmanager
    def app_context() -> Iterator[None]:
        seen.append("enter")
        try:
            yield
        finally:
            seen.append("exit")

    worker = registry.worker(queue_name, drain_delay=0.2)
    registry.job_context = app_context  # set after the worker was built (an init_app): still used
    works.enqueue()
    breaks.enqueue()
    k = QueueKeys(queue_name)
    with Running(worker):
        assert wait_until(lambda: connection.zcard(k.completed) == 1 and connection.zcard(k.failed) == 1)
    assert seen == ["enter", "run works", "exit", "enter", "run breaks", "exit"]
    assert registry.queue(queue_name).get_jobs("failed")[0].failed_reason == "broken"


def test_the_client_is_made_on_first_use_from_a_url_a_factory_or_redis_url(
        server_url: str, url_connection: redis.Redis, queue_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[redis.Redis] = []

    def factory() -> redis.Redis:
        made.append(redis.Redis.from_url(server_url))
        return made[-1]

    by_factory = JobRegistry(factory)
    assert made == []  # nothing made at construction
    assert by_factory.connection() is by_factory.connection() is made[0]
    assert by_factory.queue(queue_name) is by_factory.queue(queue_name)
    monkeypatch.setenv("REDIS_URL", server_url)
    for registry in (JobRegistry(server_url), JobRegistry(), by_factory):
        registry.register(lambda job: None, name="ping", queue=queue_name)
        job = registry.queue(queue_name).add("ping")
        assert Queue(url_connection, queue_name).get_job(job.id) is not None
        registry.close()
    assert len(made) == 1
    with pytest.raises(InvalidInputError, match=r"returned 'nope', not a redis\.Redis"):
        JobRegistry(lambda: "nope").connection()  # type: ignore[arg-type, return-value]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
@pytest.mark.parametrize("given", ["url", "client"])
def test_a_forked_child_gets_a_client_of_its_own_and_the_parent_keeps_its_own(
        server_url: str, url_connection: redis.Redis, queue_name: str, given: str) -> None:
    registry = JobRegistry(server_url if given == "url" else url_connection)

    @registry.job(queue=queue_name)
    def email(job: Any) -> None: ...

    parent_client = registry.connection()
    parent_queue = registry.queue(queue_name)
    email.enqueue(to="from the parent")  # the parent's socket is open when it forks
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: enqueue through the registry, report, and leave without any cleanup
        status = 1
        try:
            os.close(read_end)
            child_client = registry.connection()
            fresh = child_client is not parent_client and registry.queue(queue_name) is not parent_queue
            job = email.enqueue(to="from the child")
            os.write(write_end, f"{fresh} {job.id}".encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        reported = pipe.read()
    _, child_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(child_status) == 0, reported
    fresh, job_id = reported.split()
    assert fresh == "True"
    assert registry.connection() is parent_client and registry.queue(queue_name) is parent_queue
    assert parent_client.ping()  # the child never touched the parent's socket
    stored = Queue(url_connection, queue_name).get_job(job_id)
    assert stored is not None and stored.data == {"to": "from the child"}
    email.enqueue(to="after the fork")
    assert registry.queue(queue_name).get_job_counts("waiting") == {"waiting": 3}
    if given == "url":
        registry.close()


def test_the_prefix_applies_to_what_the_registry_adds_and_runs(connection: redis.Redis, queue_name: str) -> None:
    registry = JobRegistry(connection, prefix="app")

    @registry.job(queue=queue_name)
    def email(job: Any) -> str:
        return "sent"

    assert repr(registry) == f"JobRegistry(prefix='app', queues=[{queue_name!r}])"
    job = email.enqueue(to="a@b.c")
    k = QueueKeys(queue_name, "app")
    try:
        assert connection.exists(k.job(job.id)) and not connection.exists(QueueKeys(queue_name).job(job.id))
        with Running(registry.worker(queue_name, drain_delay=0.2)):
            assert wait_until(lambda: connection.zcard(k.completed) == 1)
    finally:
        keys = list(connection.scan_iter(match=f"app:\\{{{queue_name}\\}}:*", count=SCAN_COUNT))
        connection.delete(*keys)


def test_eager_with_the_registry_runs_each_queue_with_its_own_functions(
        connection: redis.Redis, queue_name: str, other_queue: str) -> None:
    from echomq.testing import eager

    contexts: list[str] = []
    registry = JobRegistry(connection)

    @registry.job(queue=queue_name)
    def welcome(job: Any) -> str:
        audit.enqueue(event=f"welcomed {job.data['to']}")  # a job adding a job of another queue
        return f"sent to {job.data['to']}"

    @registry.job("welcome", queue=other_queue)  # the same name in another queue: another function
    def audit(job: Any) -> str:
        return job.data["event"]

    @contextlib.contextmanager
    def app_context() -> Iterator[None]:
        contexts.append("in")
        yield

    registry.job_context = app_context
    untouched = Queue(connection, f"{queue_name}-not-registered")
    with eager(registry) as session:
        job = welcome.enqueue(to="ada@example.com")
        untouched.add("welcome")
        built_by_the_view = Queue(connection, queue_name).add("welcome", {"to": "bob@example.com"})
    assert [(run.queue, run.name, run.return_value) for run in session.report] == [
        (queue_name, "welcome", "sent to ada@example.com"), (other_queue, "welcome", "welcomed ada@example.com"),
        (queue_name, "welcome", "sent to bob@example.com"), (other_queue, "welcome", "welcomed bob@example.com")]
    stored = registry.queue(queue_name).get_job(job.id)
    assert stored is not None and stored.return_value == "sent to ada@example.com"
    assert registry.queue(queue_name).get_job(built_by_the_view.id).get_state() == "completed"  # type: ignore[union-attr]
    assert contexts == ["in"] * 4
    assert untouched.get_job_counts("waiting") == {"waiting": 1}  # a queue the registry has no job for
    untouched.obliterate(force=True)
    welcome.enqueue(to="after@example.com")  # the block is over: enqueued, not run
    assert registry.queue(queue_name).get_job_counts("waiting") == {"waiting": 1}
