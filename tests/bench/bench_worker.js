'use strict';
// BullMQ 6.7 side of bench_worker.py: seed N jobs with addBulk (not timed), then time a
// Worker with a no-op processor at the given concurrency until it has processed all N.
//   node bench_worker.js <queue> <N> <concurrency>     (REDIS_URL, NODE_PATH set by the caller)
// Prints one JSON line: {"seconds": s, "jobs": N}.
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

async function main() {
  const [queueName, nText, cText] = process.argv.slice(2);
  const n = Number(nText);
  const concurrency = Number(cText);
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const connection = new IORedis(url, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection, prefix: 'emq' });
  for (let i = 0; i < n; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) batch.push({ name: 'noop', data: { i: j } });
    await queue.addBulk(batch);
  }
  let processed = 0;
  let t0 = 0;
  let resolveDone;
  const done = new Promise((resolve) => { resolveDone = resolve; });
  const worker = new Worker(queueName, async () => {
    processed += 1;
    if (processed === n) resolveDone(process.hrtime.bigint());
    return null;
  }, { connection: new IORedis(url, { maxRetriesPerRequest: null }), prefix: 'emq', concurrency, autorun: false });
  t0 = process.hrtime.bigint();
  worker.run();
  const t1 = await done;
  await worker.close();
  await queue.close();
  await connection.quit();
  process.stdout.write(JSON.stringify({ seconds: Number(t1 - t0) / 1e9, jobs: n }) + '\n');
  process.exit(0);
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + '\n'); process.exit(1); });
