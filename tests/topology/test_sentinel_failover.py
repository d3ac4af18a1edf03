"""The Sentinel master fails over under a worker at 200 jobs/s, a started QueueEvents and an
``every: 500`` schedule (tests/support/failover_load.py), all on ``Sentinel.master_for()``
clients: once by kill -9 (the sentinels notice, promote the replica; the killed node is started
again as its replica), once by ``SENTINEL FAILOVER`` (the old master, still running, is demoted
to a replica and answers writes with READONLY). EchoMQ carries on against the new master and
loses nothing the new master holds.

The measured pauses are recorded as properties of the test (``--junitxml`` shows them).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from support.failover_load import FailoverLoad
from support.topologies import SentinelSetup
from support.workers import wait_until

pytestmark = [pytest.mark.real_only, pytest.mark.slow]


@pytest.mark.parametrize(("how", "extra"), [
    ("kill-9", []),
    ("sentinel-failover", []),
    # a master with no replica in sync for 2 s refuses writes (NOREPLICAS): the demoted master's
    # window of lost writes shrinks to that, paid for by refused writes until it is a replica
    ("sentinel-failover", ["min-replicas-to-write 1", "min-replicas-max-lag 2"]),
], ids=["kill-9", "sentinel-failover", "sentinel-failover-min-replicas"])
def test_the_queue_carries_on_after_the_master_fails_over(how: str, extra: list[str],
                                                          sentinel_factory: Callable[..., SentinelSetup],
                                                          queue_name: str,
                                                          record_property: Callable[[str, object], None]) -> None:
    setup = sentinel_factory(extra=extra)
    master, survivor = setup.master(), setup.replica()
    load = FailoverLoad(setup.client, survivor, queue_name)
    try:
        load.start()
        assert wait_until(lambda: load.completed_count() >= 400, timeout=30), "the load never got going"
        load.mark_break()
        if how == "kill-9":
            master.kill()
        else:
            setup.failover()
        assert setup.wait_master_change(master) is survivor
        load.mark_promoted()
        assert wait_until(load.completed_since_break, timeout=30), "no job completed after the failover"
        assert wait_until(load.delivered_since_break, timeout=30), "QueueEvents delivered nothing after the failover"
        if how == "kill-9":
            writes_end = load.kill_at
            setup.restart(master)  # back as the new master's replica, under the load
        else:
            setup.wait_demoted(master)  # until then the old master takes writes: they are lost
            writes_end = time.monotonic()
            record_property("old_master_demoted_after_s", round(writes_end - load.kill_at, 3))
        time.sleep(1.0)
        outcome = load.finish()
    finally:
        load.close()
    for name, value in outcome.metrics.items():
        record_property(name, value)
    assert outcome.problems(load.kill_wall_ms, (load.kill_at, writes_end)) == []
    if "min-replicas-to-write 1" in extra:
        # the promoted replica drops its link to the old master at once: from then on the old
        # master refuses writes, so none it acknowledged is lost
        assert outcome.lost == set()
    assert len(outcome.present & outcome.completed) >= 600  # ~3 s of 200/s, all of it done
