#!/usr/bin/env node
'use strict';
// bull-board (the Node dashboard) served over EchoMQ queues, for the interop tests and for a
// quick look by hand:
//
//   node bullboard.js --port 3000 --queue orders [--queue emails ...]
//
// Redis is REDIS_URL (default redis://127.0.0.1:6379). Each queue is opened the way an EchoMQ
// queue is opened from BullMQ: prefix 'emq' and the name in braces, '{orders}'. The board is
// mounted at '/', so its JSON API is under /api (GET /api/queues, PUT /api/queues/:q/:id/retry
// ...). Once the port listens, one JSON line {"listening": PORT} goes to stdout; SIGTERM or
// SIGINT closes the server and the Redis connections, then the process exits.
const express = require('express');
const IORedis = require('ioredis');
const { Queue } = require('bullmq');
const { createBullBoard } = require('@bull-board/api');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { ExpressAdapter } = require('@bull-board/express');

function parseArgs(argv) {
  const options = { port: Number(process.env.PORT || 3000), queues: [] };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === '--port' && value !== undefined) {
      options.port = Number(value);
      i += 1;
    } else if (flag === '--queue' && value !== undefined) {
      options.queues.push(value);
      i += 1;
    } else {
      throw new Error(`unknown argument ${JSON.stringify(flag)}: use --port N --queue NAME [--queue NAME ...]`);
    }
  }
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
    throw new Error(`--port ${options.port}: not a port number`);
  }
  if (options.queues.length === 0) throw new Error('give at least one --queue NAME');
  return options;
}

function main() {
  const { port, queues: names } = parseArgs(process.argv.slice(2));
  const connection = new IORedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  const queues = names.map((name) => new Queue(`{${name}}`, { prefix: 'emq', connection }));

  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/');
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue)), serverAdapter });

  const app = express();
  app.use('/', serverAdapter.getRouter());
  const server = app.listen(port, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ listening: server.address().port }) + '\n');
  });

  let closing = false;
  const close = () => {
    if (closing) return;
    closing = true;
    server.close();
    Promise.all(queues.map((queue) => queue.close().catch(() => undefined)))
      .then(() => connection.quit().catch(() => undefined))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', close);
  process.on('SIGINT', close);
}

try {
  main();
} catch (err) {
  process.stderr.write(`bullboard.js: ${err.message}\n`);
  process.exit(2);
}
