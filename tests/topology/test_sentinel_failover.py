"""The Sentinel master fails over under a producer adding as fast as it can, a worker, a started
QueueEvents and an ``every: 500`` schedule (tests/support/failover_load.py), all on
``Sentinel.master_for()`` clients: a planned ``SENTINEL FAILOVER`` sent to the sentinel the
clients ask first (it runs the failover, and is the one whose ``SENTINEL MASTERS`` lags), the
same sent to the last one, and a kill -9 of the master, with default settings and with
``wait_replicas="all"``. One failover per test, every assertion on it:

* adds lost: at most 0.5 s worth at the measured add rate, each one reported by the Queue
  (``lost_job_ids``); none with ``wait_replicas="all"`` (an add that was not confirmed raised
  ReplicationError and is not counted as acknowledged);
* no id names two jobs (every acknowledged id still names the add that got it);
* every schedule slot ran at most once;
* the reader delivered every entry of the new master's stream it had not delivered (the
  QueueEvents part is engineer "streams"'s: see Outcome.problems).

The figures are recorded as properties of the test (``--junitxml`` shows them).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from support.failover_load import FailoverLoad, assert_books
from support.topologies import SentinelSetup
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]

@pytest.mark.parametrize(("how", "wait_replicas"), [
    ("failover-to-first-asked", 0),
    ("failover-to-last-asked", 0),
    ("kill-9", 0),
    ("kill-9", "all"),
], ids=["planned-leader-first", "planned-leader-not-first", "kill-9", "kill-9-wait-all"])
def test_a_failover_under_full_load(how: str, wait_replicas: int | str,
                                    sentinel_factory: Callable[..., SentinelSetup], queue_name: str,
                                    record_property: Callable[[str, object], None]) -> None:
    setup = sentinel_factory()
    master, survivor = setup.master(), setup.replica()
    load = FailoverLoad(setup.client, survivor, queue_name, wait_replicas=wait_replicas)
    try:
        load.start()
        assert wait_until(lambda: load.completed_count() >= 200, timeout=30), "the load never got going"
        load.mark_break()
        if how == "kill-9":
            master.kill()
        else:
            sentinel = setup.sentinels[0] if how == "failover-to-first-asked" else setup.sentinels[-1]
            sentinel.call("SENTINEL", "FAILOVER", setup.service)
        assert setup.wait_master_change(master) is survivor
        load.mark_promoted()
        assert wait_until(load.completed_since_break, timeout=30), "no job completed after the failover"
        assert wait_until(load.delivered_since_break, timeout=30), "QueueEvents delivered nothing after the failover"
        outcome = load.finish()
    finally:
        load.close()
    for name, value in outcome.metrics.items():
        record_property(name, value)
    print(f"\n{how} wait_replicas={wait_replicas}: {outcome.metrics}")
    assert_books(outcome, load, none_lost=wait_replicas == "all" or how != "kill-9")
