"""A Flask app configured with a cluster URL: its jobs are enqueued on, and run from, the
master of their queue's slot (the registry routes each Queue and Worker it makes)."""

from __future__ import annotations

import uuid

from flask_app import create_app, echomq
from redis.cluster import RedisCluster

from echomq import Queue

from support.queue_keys import SCAN_COUNT
from support.topologies import Cluster


def test_an_app_on_a_cluster_url_enqueues_and_runs_its_jobs(redis_cluster: Cluster,
                                                            cluster_connection: RedisCluster) -> None:
    prefix = f"tflask-{uuid.uuid4().hex[:10]}"
    app = create_app({"ECHOMQ_URL": redis_cluster.url(), "ECHOMQ_PREFIX": prefix, "ECHOMQ_EVENTS": "manual"})
    try:
        job_id = app.test_client().post("/signup", data={"email": "a@example.com"}).get_json()["job_id"]
        queue = Queue(cluster_connection, "mail", prefix=prefix)
        assert queue.get_job(job_id).data == {"to": "a@example.com"}
        worker = echomq.registry_for(app).worker("mail")
        try:
            worker.run(burst=True)
        finally:
            worker.close()
        job = queue.get_job(job_id)
        assert job.get_state() == "completed" and job.return_value["greeting"] == "Welcome"
    finally:
        echomq.state(app).registry.close()
        for key in cluster_connection.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT):
            cluster_connection.delete(key)
