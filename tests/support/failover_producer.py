"""A producer adding as fast as it can, in a process of its own, for the failover tests.

Issue 23's loss was measured with a producer alone at full rate (thousands of adds a second); in
the test's own process, beside a worker and a reader, the GIL holds a producer to a hundred adds
a second, too few to show a window of lost writes. So the failover tests start this script:

    python failover_producer.py URL QUEUE OUT [--bulk N] [--wait-replicas N|all]

It adds on one thread with ``Queue.add`` in a loop and, with ``--bulk``, on a second with
``add_bulk`` of N jobs (each thread its own Queue, the way two producer processes would be),
prints ``ready`` once both have had an add acknowledged, and stops when its stdin closes. Then
it writes OUT (JSON): every acknowledged add in order as ``[job id, thread, i, monotonic time]``
(CLOCK_MONOTONIC is the machine's: the test compares it with its own), the adds that raised,
the ReplicationErrors (job id -> replicas that confirmed) and what each Queue reported lost
(``lost_job_ids``). The job's data is ``{"p": thread, "i": i}``, so the test tells an add from
another one that got the same id.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import redis

from echomq import Queue, ReplicationError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("queue")
    parser.add_argument("out")
    parser.add_argument("--bulk", type=int, default=0)
    parser.add_argument("--wait-replicas", default="0")
    args = parser.parse_args()
    wait: int | str = args.wait_replicas if args.wait_replicas == "all" else int(args.wait_replicas)
    stop = threading.Event()
    threads = ["add"] + (["bulk"] if args.bulk else [])
    books: dict[str, dict[str, Any]] = {
        name: {"adds": [], "errors": 0, "replication_errors": {}, "lost": []} for name in threads}
    started = {name: threading.Event() for name in threads}

    def produce(name: str) -> None:
        book = books[name]
        adds = book["adds"]
        try:
            queue = Queue(args.url, args.queue, wait_replicas=wait)
        except Exception as exc:  # e.g. an option this version refuses: the test says so
            book["errors"], book["refused"] = 1, repr(exc)
            started[name].set()
            return
        i = 0
        try:
            while not stop.is_set():
                try:
                    if name == "bulk":
                        jobs = queue.add_bulk([{"name": "n", "data": {"p": name, "i": i + k}}
                                               for k in range(args.bulk)])
                        now = time.monotonic()
                        adds.extend([job.id, name, i + k, now] for k, job in enumerate(jobs))
                        i += args.bulk
                    else:
                        job_id = queue.add("n", {"p": name, "i": i}).id
                        adds.append([job_id, name, i, time.monotonic()])
                        i += 1
                    started[name].set()
                except ReplicationError as exc:  # on the master, not confirmed: not acknowledged
                    book["replication_errors"].update(dict.fromkeys(exc.job_ids, exc.acknowledged))
                    i += args.bulk if name == "bulk" else 1
                except (redis.RedisError, OSError):
                    book["errors"] += 1
                    i += args.bulk if name == "bulk" else 1
                    stop.wait(0.01)
        finally:
            book["lost"] = list(getattr(queue, "lost_job_ids", []))
            queue.close()

    workers = [threading.Thread(target=produce, args=(name,), daemon=True) for name in threads]
    for worker in workers:
        worker.start()
    for name in threads:
        started[name].wait(30)
    print("ready", flush=True)
    sys.stdin.read()  # the test closes it to stop the producer
    stop.set()
    for worker in workers:
        worker.join(30)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(books, out)


if __name__ == "__main__":
    main()
