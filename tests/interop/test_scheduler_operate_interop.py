"""Operating a schedule with BullMQ 6.7 on the same queue (docs/protocol.md §4.6).

1. A paused EchoMQ schedule is not run by a BullMQ Worker; a run_now is, once, without moving
   the schedule; after resume the BullMQ Worker advances it again.
2. What BullMQ's upsertJobScheduler does with a paused schedule: an ``every`` one is resumed
   (a new iteration at the next slot), a pattern one whose parked slot is still to come is
   refused (its next tick is the parked job: SchedulerJobIdCollision) and stays paused.
3. BullMQ's getJobSchedulers lists a paused scheduler at its parked slot, and the parked job in
   no state.
"""

from __future__ import annotations

import time

from echomq.schedule.scheduler import JobScheduler

HOUR = 3_600_000


def collect(queue_name: str, seconds: float, until: int = 1000) -> str:
    """JS: a BullMQ Worker on the queue for ``seconds`` (or until ``until`` jobs), returning the ids."""
    return (
        "const seen = [];"
        f"const w = new bullmq.Worker('{{{queue_name}}}', async (job) => {{ seen.push(job.id); }},"
        "  {connection: connection(), prefix});"
        f"const deadline = Date.now() + {int(seconds * 1000)};"
        f"while (seen.length < {until} && Date.now() < deadline) await sleep(20);"
        "await w.close(); return seen;"
    )


def test_a_bullmq_worker_does_not_run_a_paused_schedule(bullmq_peer, connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    first = sched.upsert("beat", {"every": 300}, "beat")  # due now: in wait
    assert first is not None and sched.pause("beat") is True
    manual = sched.run_now("beat")
    [seen] = bullmq_peer.run(collect(queue_name, 1.5))
    assert seen == [manual], "only the manual run ran; the paused schedule did not"
    record = sched.get("beat")
    assert record is not None and record.paused and record.next_millis == first.due_ms
    assert record.iteration_count == 1, "BullMQ's step produced nothing from the manual run"

    assert sched.resume("beat") is True
    [seen] = bullmq_peer.run(collect(queue_name, 10, until=3))
    assert seen[0] == first.job_id and len(seen) == 3, "resumed: BullMQ runs the parked one, then advances it"
    assert sched.get("beat").iteration_count >= 3  # type: ignore[union-attr]


def test_bullmq_upsert_of_a_paused_every_schedule_resumes_it(bullmq_peer, connection, queue_name):
    sched = JobScheduler(connection, queue_name)
    start = int(time.time() * 1000) + HOUR
    parked = sched.upsert("ev", {"every": 60_000, "start_date": start}, "ev")
    assert parked is not None and sched.pause("ev") is True
    [theirs] = bullmq_peer.run(
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"
        f"const job = await q.upsertJobScheduler('ev', {{every: 60000, startDate: {start}}}, {{name: 'ev2'}});"
        "const s = await q.getJobScheduler('ev'); const state = await job.getState(); await q.close();"
        "return {id: job.id, next: s.next, state};"
    )
    assert theirs["id"] == f"repeat:ev:{start + 60_000}" and theirs["state"] == "delayed"
    record = sched.get("ev")
    assert record is not None and record.paused is False, "BullMQ's upsert resumed it"
    assert record.next_millis == start + 60_000 and record.name == "ev2"
    # the parked job BullMQ left behind is cleared by EchoMQ's next pause of that scheduler
    assert connection.exists(sched.keys.job(parked.job_id)) == 1
    assert sched.pause("ev") is True and connection.exists(sched.keys.job(parked.job_id)) == 0
    assert sched.get("ev").paused  # type: ignore[union-attr]


def test_bullmq_upsert_of_a_paused_pattern_schedule_is_refused_and_it_stays_paused(bullmq_peer, connection,
                                                                                     queue_name):
    sched = JobScheduler(connection, queue_name)
    parked = sched.upsert("daily", {"pattern": "0 9 * * *", "tz": "Europe/Berlin"}, "report")
    assert parked is not None and sched.pause("daily") is True
    [theirs] = bullmq_peer.run(
        f"const q = new bullmq.Queue('{{{queue_name}}}', {{connection: connection(), prefix}});"
        "let error = null;"
        "try { await q.upsertJobScheduler('daily', {pattern: '0 9 * * *', tz: 'Europe/Berlin'}, {name: 'r2'}); }"
        "catch (e) { error = String(e.message); }"
        "const all = await q.getJobSchedulers(); const counts = await q.getJobCounts();"
        "await q.close(); return {error, all, counts};"
    )
    assert theirs["error"] == "Cannot create job scheduler iteration - job ID already exists. addJobScheduler"
    [listed] = theirs["all"]
    assert listed["key"] == "daily" and listed["next"] == parked.due_ms and listed["name"] == "report"
    assert sum(theirs["counts"].values()) == 0, "the parked job is in no state BullMQ counts"
    record = sched.get("daily")
    assert record is not None and record.paused and record.name == "report"


def test_an_echomq_resume_is_advanced_by_a_bullmq_worker_with_the_policy_applied(bullmq_peer, connection,
                                                                                  queue_name):
    """run_all resumed late: the missed slots within the grace and the next run, all run by BullMQ."""
    now = int(time.time() * 1000)
    sched = JobScheduler(connection, queue_name, clock=lambda: now - 5_000)
    first = sched.upsert("catch", {"every": 1000}, "catch", misfire="run_all", misfire_grace_ms=2_500)
    assert first is not None and sched.pause("catch") is True
    assert JobScheduler(connection, queue_name).resume("catch", now_ms=now) is True
    missed = [f"repeat:catch:{first.due_ms + k * 1000}" for k in (3, 4, 5)]  # within 2.5 s of now
    [seen] = bullmq_peer.run(collect(queue_name, 10, until=4))
    assert seen[:3] == missed, "oldest first"
    assert seen[3] == f"repeat:catch:{first.due_ms + 6000}", "then the next run, which BullMQ advances"
