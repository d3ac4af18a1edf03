"""Least-privilege ACL users, one per role, on a server the test starts (docs/security.md, ACL).

``RULES`` are the documented rules, for queue ``orders``: each role runs end to end under its
rule alone and Redis refuses it nothing (its ACL LOG stays empty); each rule is exactly the
commands its scripts and its own calls use. A user of another queue cannot touch this one; a
role missing one permission is told which command and key pattern it lacks, with nothing
written; and where a feature needs a permission a restricted user lacks (XINFO for gap notices,
CLIENT UNBLOCK for a fast close, CLIENT SETNAME for a named worker, CLIENT LIST for
get_workers) it degrades as documented.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError

from echomq import EventType, GapNotice, JobScheduler, PermissionDeniedError, Queue, QueueEvents, Worker
from echomq.cli import main as cli
from echomq.protocol.keys import QueueKeys
from echomq.transport.calls import script_commands
from echomq.transport.scripts import script

from support.snapshot import queue_snapshot
from support.workers import seed_job, wait_until

pytestmark = [
    pytest.mark.real_only,
    # The documented rules use Redis 7's read-only key patterns (%R~) and per-subcommand rules, and
    # the preflight asks redis.acl_check_cmd: docs/security.md says they need Redis 7.0.
    pytest.mark.min_redis(7, 0, reason="%R~ key permissions, subcommand ACL rules, redis.acl_check_cmd"),
]

Q = "orders"
KEYS = "~emq:{orders}:*"
READ_KEYS = "%R~emq:{orders}:*"
PASSWORD = "s3cret-pw"

#: The scripts each role runs, and the commands it sends itself (not from a script).
ROLE_SCRIPTS: dict[str, tuple[str, ...]] = {
    "producer": ("addStandardJob", "addDelayedJob", "addPrioritizedJob", "addParentJob",
                 "releaseParentIfNoPendingDependencies", "addFlow"),
    "worker": ("moveToActive", "moveToFinished", "moveToDelayed", "retryJob", "moveToWaitingChildren",
               "extendLocks", "moveStalledJobsToWait", "updateJobScheduler", "repairJobScheduler",
               "updateProgress", "addLog"),
    "scheduler": ("addJobScheduler", "removeJobScheduler", "getJobScheduler", "getJobSchedulers",
                  "pauseJobScheduler", "resumeJobScheduler", "runJobSchedulerNow"),
    "events": (),
    "readonly": ("getJobScheduler", "getJobSchedulers"),
}
ROLE_OWN_COMMANDS: dict[str, tuple[str, ...]] = {
    # EVALSHA, SCRIPT LOAD after a NOSCRIPT; the reads of one MULTI (a job's state and logs);
    # meta's version stamp, get_job, get_job_counts.
    "producer": ("evalsha", "script|load", "multi", "exec", "hset", "hgetall", "llen", "zcard"),
    # The marker wait, its named connection and its cut; the scheduler step and repair's reads;
    # the watchdog's read of the running jobs' cancel requests; INFO, who serves it (failovers).
    "worker": ("evalsha", "script|load", "bzpopmin", "client|setname", "client|id", "client|unblock",
               "hexists", "hmget", "hgetall", "zrange", "mget", "info"),
    # count; the reads of resume, run_now and history (docs/protocol.md §4.6).
    "scheduler": ("evalsha", "script|load", "zcard", "zscore", "hgetall", "hmget", "hget", "zrevrange",
                  "lrange"),
    # The reads, the named connection and its cut, INFO at each connect (who serves the stream).
    "events": ("xread", "xrevrange", "xinfo|stream", "info", "client|setname", "client|id", "client|unblock"),
    # events tail, schedulers list and get.
    "readonly": ("xread", "xrevrange", "xinfo|stream", "info", "client|setname", "client|id", "client|unblock",
                 "evalsha", "script|load", "zcard"),
}

#: The documented rules (docs/security.md), what ``ACL SETUSER <user> reset on >pw resetchannels
#: -@all`` is followed by.
RULES: dict[str, tuple[str, ...]] = {
    "producer": (KEYS, "+evalsha", "+script|load", "+multi", "+exec", "+del", "+exists",
                 "+get", "+hget", "+hgetall", "+hmget", "+hset", "+incr", "+llen", "+lpush", "+pttl", "+rpush",
                 "+sadd", "+scard", "+set", "+xadd", "+zadd", "+zcard", "+zrange", "+zrem", "+zrevrangebyscore",
                 "+zscore"),
    "worker": (KEYS, "+evalsha", "+script|load", "+bzpopmin", "+client|setname", "+client|id",
               "+client|unblock", "+del", "+exists", "+get", "+hdel", "+hexists", "+hget", "+hgetall", "+hincrby",
               "+hmget", "+hset", "+incr", "+info", "+llen", "+lpush", "+lrange", "+lrem", "+ltrim", "+mget",
               "+pexpire",
               "+pttl", "+rpoplpush", "+rpush", "+sadd", "+scard", "+set", "+sismember", "+smembers", "+srem", "+xadd",
               "+xtrim", "+zadd", "+zcard", "+zpopmin", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyrank",
               "+zrevrange", "+zrevrangebyscore", "+zscore"),
    "scheduler": (KEYS, "+evalsha", "+script|load", "+del", "+exists", "+get", "+hget", "+hgetall", "+hincrby",
                  "+hmget", "+hset", "+incr", "+llen", "+lpos", "+lpush", "+lrange", "+lrem", "+rpush", "+xadd",
                  "+zadd", "+zcard",
                  "+zrange", "+zrem", "+zrevrange", "+zrevrangebyscore", "+zscore"),
    "events": (READ_KEYS, "+xread", "+xrevrange", "+xinfo|stream", "+info", "+client|setname", "+client|id",
               "+client|unblock"),
    # EVALSHA needs write access to the keys it declares (getJobScheduler's one key, repeat),
    # but the user runs no command that writes.
    "readonly": (READ_KEYS, "~emq:{orders}:repeat", "+evalsha", "+script|load", "+zcard", "+hgetall", "+zscore",
                 "+zrange", "+zrevrange", "+xread", "+xrevrange", "+xinfo|stream", "+info", "+client|setname",
                 "+client|id", "+client|unblock"),
}


def without(role: str, *commands: str) -> tuple[str, ...]:
    rule = RULES[role]
    assert all(f"+{c}" in rule for c in commands), commands
    return tuple(part for part in rule if part.lstrip("+") not in commands)


class Acl:
    """A private redis-server, its admin client, and the users a test creates on it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.admin = redis.Redis(port=port)

    def user(self, name: str, rule: tuple[str, ...]) -> str:
        """Create (or replace) ``name`` with exactly ``rule``; its URL."""
        self.admin.execute_command("ACL", "SETUSER", name, "reset", "on", f">{PASSWORD}", "resetchannels", "-@all",
                                   *rule)
        return f"redis://{name}:{PASSWORD}@127.0.0.1:{self.port}/0"

    def denials(self) -> list[dict[str, Any]]:
        """The ACL LOG (raw: redis-py's parser trips on client names holding '=')."""
        def text(value: Any) -> Any:
            return value.decode() if isinstance(value, bytes) else value

        out = []
        for entry in self.admin.execute_command("ACL", "LOG"):
            pairs = entry.items() if isinstance(entry, dict) else zip(entry[::2], entry[1::2])
            out.append({text(k): text(v) for k, v in pairs})
        return out

    def refused(self, name: str) -> int:
        """How many times the ACL refused ``name`` (a command, a subcommand or a key)."""
        return sum(int(entry["count"]) for entry in self.denials() if entry["object"] == name)


@pytest.fixture
def acl(redis_server_factory: Callable[..., Any]) -> Iterator[Acl]:
    server = redis_server_factory(persistent=False)
    rig = Acl(server.port)
    rig.admin.script_flush()  # each role also takes the NOSCRIPT path: SCRIPT LOAD is in its rule
    yield rig
    rig.admin.close()


class Seen:
    """A QueueEvents subscriber: what arrived, thread-safe."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, event_type: Any, data: dict[str, Any]) -> None:
        with self._lock:
            self.items.append((event_type, data))

    def jobs(self, event_type: EventType) -> set[str]:
        with self._lock:
            return {data.get("jobId", "") for t, data in self.items if t is event_type}

    def gaps(self) -> list[GapNotice]:
        with self._lock:
            return [t for t, _ in self.items if isinstance(t, GapNotice)]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# -- the rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("role", sorted(RULES))
def test_each_rule_is_exactly_what_the_role_sends(role: str) -> None:
    """Every command a role's scripts can call (whatever branch runs) and every command it sends
    itself is in its rule, and nothing else is: a script that starts calling a new command fails
    here before it fails a deployment."""
    needed = {c for name in ROLE_SCRIPTS[role] for c in script_commands(script(name))} | set(ROLE_OWN_COMMANDS[role])
    granted = {part[1:] for part in RULES[role] if part.startswith("+")}
    assert granted == needed, f"missing {sorted(needed - granted)}, not needed {sorted(granted - needed)}"


def test_every_role_works_end_to_end_under_its_rule_alone(acl: Acl, capsys: pytest.CaptureFixture[str]) -> None:
    """A scheduler upserted by the admin user and advanced by the worker user; jobs (plain,
    delayed, bulk, a flow, one retried) added by the producer user and processed by the worker
    user, which also renews a lock, recovers a stalled job and logs progress; all of it seen by
    the events user; the CLI's read-only commands run as the read-only user. Redis refused no
    one anything, not even what a role could do without."""
    urls = {role: acl.user(role, rule) for role, rule in RULES.items()}
    keys = QueueKeys(Q)
    ghost = seed_job(acl.admin, Q, "ghost")  # its worker died: active, no lock, until the stalled check
    acl.admin.lmove(keys.wait, keys.active, "RIGHT", "LEFT")

    seen = Seen()
    reader = QueueEvents(urls["events"], Q, last_event_id="0", block_ms=500)
    reader.subscribe(seen)
    reader.start()
    schedules = JobScheduler(urls["scheduler"], Q)
    queue = Queue(urls["producer"], Q)
    worker: Worker | None = None
    try:
        assert schedules.upsert("tick", {"every": 500}, "tick", {"n": 1}) is not None
        record = schedules.get("tick")
        assert record is not None and record.every == 500
        assert schedules.pause("tick") is True and schedules.resume("tick") is True  # §4.6, as this user
        assert schedules.history("tick") == [] and schedules.run_now("tick").startswith("repeat:tick:manual-")
        assert [r.id for r in schedules.list()] == ["tick"] and schedules.count() == 1

        plain = queue.add("email", {"to": "a@b.c"})
        flaky = queue.add("flaky", {}, attempts=2, backoff={"type": "fixed", "delay": 50})  # retried later
        again = queue.add("again", {}, attempts=2)  # retried at once
        later = queue.add("later", {}, delay=300, priority=2)
        slow = queue.add("slow", {}, priority=1)
        bulk = queue.add_bulk([("b1", {}), ("b2", {"n": 2})])
        parent = queue.add_flow({"name": "parent"}, [{"name": "child", "opts": {"job_id": "child-1"}}])
        fetched = queue.get_job(plain.id)
        assert fetched is not None and fetched.data == {"to": "a@b.c"}
        assert queue.get_job_counts("prioritized", "waiting-children") == {"prioritized": 1, "waiting-children": 1}

        def process(job: Any) -> Any:
            job.log(f"ran {job.name}")
            job.update_progress(50)
            if job.name in ("flaky", "again") and job.attempts_made == 0:
                raise RuntimeError("first attempt fails")
            if job.name == "slow":
                time.sleep(0.6)  # past lock_renew_time: the lock is renewed meanwhile
            return {"ok": job.name}

        worker = Worker(urls["worker"], Q, process, concurrency=2, lock_duration=400, stalled_interval=300,
                        drain_delay=1).start()
        ours = {plain.id, flaky.id, again.id, later.id, slow.id, *(j.id for j in bulk), parent.id, "child-1", ghost}
        assert wait_until(lambda: ours <= {k.decode() for k in acl.admin.zrange(keys.completed, 0, -1)}, 20)
        admin_view = JobScheduler(acl.admin, Q)
        assert wait_until(lambda: (admin_view.get("tick").iteration_count or 0) >= 2, 10)  # type: ignore[union-attr]
        names = [w["rawname"] for w in Queue(acl.admin, Q).get_workers()]
        assert names == [keys.client_name()]  # the worker's connection carries its BullMQ name
        assert wait_until(lambda: ours <= seen.jobs(EventType.COMPLETED), 10)
        assert ghost in seen.jobs(EventType.STALLED)
        assert flaky.id in seen.jobs(EventType.DELAYED) and later.id in seen.jobs(EventType.DELAYED)
        assert {e.get("data") for t, e in seen.items if t is EventType.PROGRESS} == {50}
        assert queue.get_job_counts("completed")["completed"] >= len(ours)
    finally:
        if worker is not None:
            worker.close(timeout=5)
        reader.close(timeout=2)
        queue.close()
        schedules.close()

    capsys.readouterr()
    assert cli(["schedulers", "list", "--queue", Q, "--redis", urls["readonly"], "--json"]) == 0
    assert [r["key"] for r in json.loads(capsys.readouterr().out)] == ["tick"]
    assert cli(["schedulers", "get", "tick", "--queue", Q, "--redis", urls["readonly"]]) == 0
    assert "every 500 ms" in capsys.readouterr().out
    assert cli(["events", "tail", "--queue", Q, "--redis", urls["readonly"], "--from", "0", "--limit", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert acl.denials() == []


# -- refusals -------------------------------------------------------------------------------------

def test_a_user_of_another_queue_cannot_touch_this_one(acl: Acl, caplog: pytest.LogCaptureFixture) -> None:
    """Every command of every role, but the keys of queue ``other`` only: it works there, and on
    ``orders`` every component is refused, told the pattern it would need, and writes nothing."""
    everything = sorted({part for rule in RULES.values() for part in rule if part.startswith("+")})
    url = acl.user("other-app", ("~emq:{other}:*", *everything))
    with Queue(url, "other") as theirs:
        assert theirs.add("fine", {}).id == "1"
    with Queue(acl.admin, Q) as owner:
        owner.add("mine", {})
    before = queue_snapshot(acl.admin, Q)

    with Queue(url, Q) as queue:
        with pytest.raises(PermissionDeniedError) as add:
            queue.add("x", {})
        with pytest.raises(PermissionDeniedError) as get:
            queue.get_job("1")
        with pytest.raises(PermissionDeniedError) as counts:
            queue.get_job_counts()
    for refused in (add, get, counts):
        assert refused.value.key_pattern == KEYS and KEYS in str(refused.value)
    with JobScheduler(url, Q) as schedules:
        with pytest.raises(PermissionDeniedError) as upsert:
            schedules.upsert("tick", {"every": 1000}, "tick")
        with pytest.raises(PermissionDeniedError) as count:
            schedules.count()
    assert upsert.value.key_pattern == KEYS and KEYS in str(upsert.value) and KEYS in str(count.value)
    with pytest.raises(PermissionDeniedError) as start:
        QueueEvents(url, Q, block_ms=200).start()
    assert KEYS in str(start.value)

    with caplog.at_level(logging.WARNING, logger="echomq"):
        worker = Worker(url, Q, lambda job: None, drain_delay=1).start()
        try:
            assert wait_until(lambda: any(KEYS in m for m in warnings_of(caplog)), 10)
        finally:
            worker.close(timeout=2)
    assert worker.processed == 0
    assert queue_snapshot(acl.admin, Q) == before


def refused_add(url: str) -> Any:
    with Queue(url, Q) as queue:
        return queue.add("x", {"n": 1})


def refused_bulk(url: str) -> Any:
    with Queue(url, Q) as queue:
        return queue.add_bulk([("a", {}), ("b", {})])


def refused_flow(url: str) -> Any:
    with Queue(url, Q) as queue:
        return queue.add_flow({"name": "parent"}, [{"name": "child"}])


def refused_upsert(url: str) -> Any:
    with JobScheduler(url, Q) as schedules:
        return schedules.upsert("nightly", {"pattern": "0 2 * * *", "tz": "Europe/Berlin"}, "report")


def refused_read(url: str) -> Any:
    reader = QueueEvents(url, Q, last_event_id="0", block_ms=100)
    try:
        return reader.run_once()
    finally:
        reader.close()


@pytest.mark.parametrize(("role", "dropped", "action", "refused"), [
    ("producer", "lpush", refused_add, "lpush"),            # called inside addStandardJob, after its first writes
    ("producer", "evalsha", refused_add, "evalsha"),
    ("producer", "script|load", refused_add, "script|load"),  # the script cache was flushed
    ("producer", "xadd", refused_bulk, "xadd"),
    ("producer", "sadd", refused_flow, "sadd"),            # the flow's script is refused before it runs
    ("scheduler", "zadd", refused_upsert, "zadd"),
    ("events", "xread", refused_read, "xread"),
], ids=["add-lpush", "add-evalsha", "add-script-load", "bulk-xadd", "flow-sadd", "upsert-zadd", "read-xread"])
def test_a_role_missing_one_permission_is_told_which_and_nothing_is_written(
        acl: Acl, role: str, dropped: str, action: Callable[[str], Any], refused: str) -> None:
    with Queue(acl.admin, Q) as owner:  # a queue in use: meta stamped, a job waiting, events written
        owner.add("before", {})
    JobScheduler(acl.admin, Q).upsert("hourly", {"every": 3_600_000}, "tick")
    acl.admin.script_flush()
    url = acl.user(role, without(role, dropped))
    before = queue_snapshot(acl.admin, Q)
    with pytest.raises(PermissionDeniedError) as caught:
        reply = action(url)
        if isinstance(reply, list):  # add_bulk raises the first refusal among its replies
            pytest.fail(f"add_bulk returned {reply!r}")
    error = caught.value
    assert isinstance(error, NoPermissionError)  # what code catching Redis's own refusal expects
    assert error.command == refused and refused in error.missing
    assert error.key_pattern == KEYS
    assert refused.upper() in str(error) and KEYS in str(error)
    assert queue_snapshot(acl.admin, Q) == before


def test_a_worker_missing_a_script_command_takes_no_job_and_says_what_it_needs(
        acl: Acl, caplog: pytest.LogCaptureFixture) -> None:
    with Queue(acl.admin, Q) as owner:
        owner.add("waiting", {})
    url = acl.user("worker", without("worker", "rpoplpush"))
    before = queue_snapshot(acl.admin, Q)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        worker = Worker(url, Q, lambda job: None, drain_delay=1, skip_stalled_check=True).start()
        try:
            assert wait_until(lambda: any("+rpoplpush" in m for m in warnings_of(caplog)), 10)
        finally:
            worker.close(timeout=2)
    told = next(m for m in warnings_of(caplog) if "+rpoplpush" in m)
    assert "moveToActive" in told and "RPOPLPUSH" in told and KEYS in told
    assert worker.processed == 0
    assert queue_snapshot(acl.admin, Q) == before  # the job still waits, untouched


# -- documented degradations --------------------------------------------------------------------

@pytest.mark.parametrize("xinfo", [True, False], ids=["xinfo", "xinfo-refused"])
def test_without_xinfo_the_reader_reads_on_without_gap_notices_and_warns_once(
        acl: Acl, xinfo: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Entries trimmed before the reader saw them: a gap notice with XINFO; without it, the
    reader still delivers what is left, reports no gap, warns once and stops asking for XINFO."""
    url = acl.user("events", RULES["events"] if xinfo else without("events", "xinfo|stream"))
    events_key = QueueKeys(Q).events
    first = [acl.admin.xadd(events_key, {"event": "waiting", "jobId": str(n)}).decode() for n in range(3)]
    seen = Seen()
    reader = QueueEvents(url, Q, last_event_id=first[0], block_ms=100)
    reader.subscribe(seen)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        try:
            assert reader.run_once() == 2
            burst = acl.admin.pipeline(transaction=True)  # 3 and 4 are gone before the next read
            for n in range(3, 6):
                burst.xadd(events_key, {"event": "waiting", "jobId": str(n)})
            burst.xtrim(events_key, maxlen=1, approximate=False)
            burst.execute()
            assert reader.run_once() == 1
            acl.admin.xadd(events_key, {"event": "waiting", "jobId": "6"})
            assert [reader.run_once() for _ in range(4)] == [1, 0, 0, 0]
        finally:
            reader.close(timeout=2)
    assert seen.jobs(EventType.WAITING) == {"1", "2", "5", "6"}
    xinfo_warnings = [m for m in warnings_of(caplog) if "XINFO" in m]
    if xinfo:
        assert [gap.from_id for gap in seen.gaps()] == [first[2]]  # one notice, after entry 2
        assert xinfo_warnings == []
    else:
        assert seen.gaps() == []
        assert len(xinfo_warnings) == 1 and "+xinfo|stream" in xinfo_warnings[0]
        assert acl.refused("xinfo|stream") == 1  # asked once, not before every read


def test_without_info_the_reader_reads_on_tells_servers_by_address_and_warns_once(
        acl: Acl, caplog: pytest.LogCaptureFixture) -> None:
    url = acl.user("events", without("events", "info"))
    events_key = QueueKeys(Q).events
    seen = Seen()
    reader = QueueEvents(url, Q, block_ms=100)
    reader.subscribe(seen)
    with caplog.at_level(logging.WARNING, logger="echomq"):
        try:
            reader.run_once()
            acl.admin.xadd(events_key, {"event": "waiting", "jobId": "1"})
            assert reader.run_once() == 1
            assert reader._blocking is not None and reader._blocking.client_id is not None
            acl.admin.client_kill_filter(_id=reader._blocking.client_id)
            with pytest.raises(redis.ConnectionError):
                reader.run_once()
            reader._blocking.drop()
            acl.admin.xadd(events_key, {"event": "waiting", "jobId": "2"})
            assert reader.run_once() == 1  # reconnected: INFO is not asked again
        finally:
            reader.close(timeout=2)
    assert seen.jobs(EventType.WAITING) == {"1", "2"} and seen.gaps() == []
    info_warnings = [m for m in warnings_of(caplog) if "INFO" in m]
    assert len(info_warnings) == 1 and "+info" in info_warnings[0]
    assert acl.refused("info") == 3  # the three sections of one connect, not asked again


@pytest.mark.parametrize("kind", ["worker", "events"])
def test_without_client_unblock_close_shuts_the_socket_and_is_still_fast(
        acl: Acl, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    url = acl.user(kind, without(kind, "client|unblock"))
    component: Any
    if kind == "worker":
        component = Worker(url, Q, lambda job: None, drain_delay=5).start()
        assert wait_until(lambda: component.running)
    else:
        component = QueueEvents(url, Q, block_ms=5000).start()
    time.sleep(0.3)  # into the 5 s blocking read
    with caplog.at_level(logging.WARNING, logger="echomq"):
        started = time.monotonic()
        component.close(timeout=2)
        took = time.monotonic() - started
    assert not component.running
    assert took < 1.0, f"close() took {took:.2f} s"
    assert warnings_of(caplog) == []
    assert acl.refused("client|unblock") >= 1


def test_without_client_setname_the_worker_runs_unnamed_and_warns_once(
        acl: Acl, caplog: pytest.LogCaptureFixture) -> None:
    url = acl.user("worker", without("worker", "client|setname"))
    done: list[str] = []
    with Queue(acl.admin, Q) as owner, caplog.at_level(logging.WARNING, logger="echomq"):
        worker = Worker(url, Q, lambda job: done.append(job.id), drain_delay=1).start()
        try:
            owner.add("first", {})
            assert wait_until(lambda: len(done) == 1, 10)
            time.sleep(0.3)  # back in the marker wait: woken by the next add, not by a poll
            started = time.monotonic()
            owner.add("second", {})
            assert wait_until(lambda: len(done) == 2, 10)
            assert time.monotonic() - started < 0.5
            assert owner.get_workers() == []  # unnamed: not listed, as documented
        finally:
            worker.close(timeout=2)
    setname = [m for m in warnings_of(caplog) if "SETNAME" in m]
    assert len(setname) == 1 and "+client|setname" in setname[0]
    assert warnings_of(caplog) == setname


def test_without_client_setname_the_reader_starts_unnamed(acl: Acl, caplog: pytest.LogCaptureFixture) -> None:
    url = acl.user("events", without("events", "client|setname"))
    seen = Seen()
    with caplog.at_level(logging.WARNING, logger="echomq"):
        reader = QueueEvents(url, Q, block_ms=200)
        reader.subscribe(seen)
        reader.start()
        try:
            acl.admin.xadd(QueueKeys(Q).events, {"event": "waiting", "jobId": "7"})
            assert wait_until(lambda: seen.jobs(EventType.WAITING) == {"7"}, 10)
        finally:
            reader.close(timeout=2)
    assert len([m for m in warnings_of(caplog) if "SETNAME" in m]) == 1


def test_get_workers_without_client_list_says_what_is_missing(acl: Acl) -> None:
    url = acl.user("producer", RULES["producer"])
    with Queue(url, Q) as queue, pytest.raises(PermissionDeniedError) as caught:
        queue.get_workers()
    assert caught.value.command == "client|list"
    assert "+client|list" in str(caught.value) and KEYS in str(caught.value)
