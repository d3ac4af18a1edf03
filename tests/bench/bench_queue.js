'use strict';
// BullMQ 6.7 side of bench_queue.py: one JSON line with what it measured.
//   node bench_queue.js add QUEUE N          N adds one at a time (each awaits its reply)
//   node bench_queue.js bulk QUEUE N BATCH   N jobs through addBulk in batches of BATCH
const { Queue } = require('bullmq');
const IORedis = require('ioredis');

async function main() {
  const [mode, name, count, batch] = process.argv.slice(2);
  const connection = new IORedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  const queue = new Queue(`{${name}}`, { connection, prefix: 'emq' });
  await queue.waitUntilReady();
  const n = parseInt(count, 10);
  const data = (i) => ({ orderId: i, customer: 'c-' + (i % 97), items: [1, 2, 3] });
  await queue.add('warmup', data(-1)); // load the scripts and warm up the JIT
  await queue.addBulk([{ name: 'warmup', data: data(-2) }]);
  const t0 = process.hrtime.bigint();
  if (mode === 'add') {
    for (let i = 0; i < n; i++) await queue.add('order', data(i));
  } else if (mode === 'bulk') {
    const size = parseInt(batch, 10);
    for (let at = 0; at < n; at += size) {
      const jobs = [];
      for (let i = at; i < Math.min(n, at + size); i++) jobs.push({ name: 'order', data: data(i) });
      await queue.addBulk(jobs);
    }
  } else {
    throw new Error('usage: node bench_queue.js add|bulk QUEUE N [BATCH]');
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  process.stdout.write(JSON.stringify({ jobs: n, seconds, waiting: await queue.getWaitingCount() }) + '\n');
  await queue.close();
  await connection.quit();
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + '\n'); process.exit(1); });
