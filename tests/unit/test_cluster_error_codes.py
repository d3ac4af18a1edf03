"""redis-py 5.0's cluster parser turns CLUSTERDOWN, MASTERDOWN and TRYAGAIN into classes whose
message has lost the code ("The cluster is down"): they are still told as "the topology moved",
so a slot owner connection raises the documented ConnectionError (a NotRunError: the command
did not run) instead of a ClusterDownError traceback in every loop (issue 23)."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ClusterDownError, MasterDownError, MovedError, TryAgainError

from echomq.transport.cluster import topology_code
from echomq.transport.unsent import NotRunError


@pytest.mark.parametrize(("error", "code"), [
    (ClusterDownError("The cluster is down"), "CLUSTERDOWN"),
    (MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."), "MASTERDOWN"),
    (TryAgainError("Multiple keys request during rehashing of slot"), "TRYAGAIN"),
    (MovedError("3351 127.0.0.1:7001"), "MOVED"),
    (redis.ResponseError("CLUSTERDOWN The cluster is down"), "CLUSTERDOWN"),  # redis-py 5's plain parser
    (redis.ResponseError("TRYAGAIN Multiple keys request during rehashing of slot"), "TRYAGAIN"),
])
def test_every_cluster_error_is_told_by_its_code(error: BaseException, code: str) -> None:
    assert topology_code(error) == code


def test_other_errors_are_not_topology_errors() -> None:
    assert topology_code(redis.ResponseError("ERR unknown command")) is None
    assert topology_code(redis.ConnectionError("reset")) is None


def test_a_call_that_did_not_run_is_a_connection_error_naming_why() -> None:
    error = NotRunError("slot 1 moved", "MOVED")
    assert isinstance(error, redis.ConnectionError) and error.code == "MOVED"
