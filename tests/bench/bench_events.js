'use strict';
// BullMQ 6.7's QueueEvents, measured for bench_events.py (run with NODE_PATH=tests/interop/node_modules).
//
//   node bench_events.js replay <queue> <n>     time to receive n events from lastEventId '0'
//   node bench_events.js live <queue> <n>       from '$': XADD->listener latency of n progress events
//   node bench_events.js close <queue>          close() latency in the middle of a blocking read
//
// <queue> is the bare name; BullMQ is given '{<queue>}' and prefix 'emq', so it reads
// emq:{<queue>}:events like EchoMQ does. Prints one JSON line.
const { QueueEvents } = require('bullmq');

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const KINDS = ['added', 'waiting', 'active', 'progress', 'completed'];
const nowUs = () => (performance.timeOrigin + performance.now()) * 1000;
const out = (value) => process.stdout.write(JSON.stringify(value) + '\n');

function open(queue, opts) {
  const u = new URL(url);
  return new QueueEvents(`{${queue}}`, {
    prefix: 'emq',
    connection: { host: u.hostname, port: Number(u.port || 6379), db: Number((u.pathname || '/0').slice(1) || 0) },
    ...opts,
  });
}

async function replay(queue, n) {
  let count = 0;
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const started = performance.now();
  const cpu = process.cpuUsage();
  const qe = open(queue, { lastEventId: '0', blockingTimeout: 1000 });
  const onEvent = () => { count += 1; if (count === n) done(); };
  for (const kind of KINDS) qe.on(kind, onEvent);
  await finished;
  const elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  await qe.close();
  out({ events: count, seconds: elapsed, per_second: count / elapsed, cpu_seconds: (used.user + used.system) / 1e6 });
}

async function live(queue, n) {
  const latencies = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const qe = open(queue, { blockingTimeout: 1000 });
  qe.on('progress', (args) => {
    latencies.push(nowUs() - args.data.ts);
    if (latencies.length === n) done();
  });
  await qe.waitUntilReady();
  out({ ready: true });
  await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, 30000))]);
  await qe.close();
  latencies.sort((a, b) => a - b);
  const pick = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  out({ events: latencies.length, p50_us: pick(0.5), p99_us: pick(0.99), max_us: latencies[latencies.length - 1] });
}

async function close(queue) {
  const samples = [];
  for (let i = 0; i < 5; i++) {
    const qe = open(queue, { blockingTimeout: 5000 });
    await qe.waitUntilReady();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = performance.now();
    await qe.close();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  out({ median_ms: samples[Math.floor(samples.length / 2)], max_ms: samples[samples.length - 1] });
}

const [mode, queue, n] = process.argv.slice(2);
const run = { replay: () => replay(queue, Number(n)), live: () => live(queue, Number(n)), close: () => close(queue) }[mode];
run().then(() => process.exit(0)).catch((err) => { process.stderr.write(String(err && err.stack || err) + '\n'); process.exit(1); });
