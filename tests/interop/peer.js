#!/usr/bin/env node
'use strict';
// BullMQ 6.7.0 driven from EchoMQ's interop tests.
//
//   node peer.js run '<async JS body>'
//
// The body runs inside an async function with these in scope:
//   bullmq      the bullmq module (Queue, Worker, QueueEvents, FlowProducer, ...)
//   connection  () => a new IORedis connection to REDIS_URL (maxRetriesPerRequest: null)
//   prefix      'emq'
//   out(value)  write one JSON line to stdout
//   sleep(ms)   a promise that resolves after ms
//   require     Node's require
// Whatever the body returns (if not undefined) is written as the last JSON line.
// Every connection opened through connection() is closed when the body finishes.
const bullmq = require('bullmq');
const IORedis = require('ioredis');

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = 'emq';
const opened = [];
const connection = () => {
  const c = new IORedis(url, { maxRetriesPerRequest: null });
  opened.push(c);
  return c;
};
const out = (value) => process.stdout.write(JSON.stringify(value) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [cmd, body] = process.argv.slice(2);
  if (cmd !== 'run' || !body) throw new Error("usage: node peer.js run '<async JS body>'");
  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
  const fn = new AsyncFunction('bullmq', 'connection', 'prefix', 'out', 'sleep', 'require', body);
  const result = await fn(bullmq, connection, prefix, out, sleep, require);
  if (result !== undefined) out(result);
}

main()
  .then(() => Promise.all(opened.map((c) => c.quit().catch(() => undefined))))
  .then(() => process.exit(0))
  .catch((err) => {
    process.stderr.write((err && err.stack) || String(err));
    process.stderr.write('\n');
    process.exit(1);
  });
