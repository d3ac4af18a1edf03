'use strict';
// BullMQ 6.7 side of bench_scheduler.py: one JSON line with what it measured.
//   node bench_scheduler.js upsert QUEUE N     N upserts one at a time (even i: every, odd i: cron + tz)
//   node bench_scheduler.js list QUEUE ROUNDS  getJobSchedulers() of the whole queue, best of ROUNDS
const { Queue } = require('bullmq');
const IORedis = require('ioredis');

async function main() {
  const [mode, name, count] = process.argv.slice(2);
  const connection = new IORedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  const queue = new Queue(`{${name}}`, { connection, prefix: 'emq' });
  await queue.waitUntilReady();
  const n = parseInt(count, 10);
  if (mode === 'upsert') {
    const upsert = (i) => (i % 2 === 0
      ? queue.upsertJobScheduler(`s-${i}`, { every: 60000 + i }, { name: 'bench', data: { i } })
      : queue.upsertJobScheduler(`s-${i}`, { pattern: '*/5 * * * *', tz: 'Europe/Berlin' }, { name: 'bench', data: { i } }));
    await upsert(-2); await upsert(-1); // load the scripts and warm up the JIT
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await upsert(i);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    process.stdout.write(JSON.stringify({ upserts: n, seconds }) + '\n');
  } else if (mode === 'list') {
    let best = Infinity; let found = 0;
    for (let r = 0; r < n; r++) {
      const t0 = process.hrtime.bigint();
      const all = await queue.getJobSchedulers();
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      found = all.length;
    }
    process.stdout.write(JSON.stringify({ found, seconds: best }) + '\n');
  } else {
    throw new Error('usage: node bench_scheduler.js upsert|list QUEUE N');
  }
  await queue.close();
  await connection.quit();
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + '\n'); process.exit(1); });
