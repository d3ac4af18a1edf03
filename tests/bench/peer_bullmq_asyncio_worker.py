"""The official asyncio ``bullmq`` package's side of bench_worker.py (run by its own venv).

    python peer_bullmq_asyncio_worker.py <redis_url> <queue> <N> <concurrency>

Seeds N jobs with addBulk (not timed), then times a Worker with a no-op processor until it has
processed all N. Prints one JSON line: {"seconds": s, "jobs": N, "version": ...}.
"""

import asyncio
import json
import sys
import time
from importlib.metadata import version

from bullmq import Queue, Worker


async def main(url: str, name: str, n: int, concurrency: int) -> None:
    queue = Queue(name, {"connection": url, "prefix": "emq"})
    for i in range(0, n, 1000):
        await queue.addBulk([{"name": "noop", "data": {"i": j}} for j in range(i, min(n, i + 1000))])
    done = asyncio.get_running_loop().create_future()
    processed = 0

    async def process(job, token):
        nonlocal processed
        processed += 1
        if processed == n and not done.done():
            done.set_result(time.perf_counter())

    t0 = time.perf_counter()
    worker = Worker(name, process, {"connection": url, "prefix": "emq", "concurrency": concurrency})
    t1 = await done
    await worker.close()
    await queue.close()
    print(json.dumps({"seconds": t1 - t0, "jobs": n, "version": version("bullmq")}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
