#!/usr/bin/env node
'use strict';
// When would BullMQ 6.7 fire a cron job scheduler next? This asks BullMQ itself, so that
// tests/data/cron_vectors.jsonl holds BullMQ's answers rather than our reading of its rules.
//
//   node tests/data/bullmq_next_runs.js < cases.jsonl   one answer line per case line
//   node tests/data/bullmq_next_runs.js --info          the versions in use, one JSON line
//
// A case is {"pattern", "tz", "ref", "startDate"?, "endDate"?, "every"?}: ref, startDate and
// endDate in epoch ms (dates may also be ISO strings), tz an IANA name or null. The answer is
// {"next": epoch ms | null, "error": message | null}:
//   next set             the run BullMQ's strategy returns (raw: not raised to ref)
//   next null, no error  the strategy returned nothing (cron-parser found no run, e.g. past
//                        endDate, and BullMQ swallowed that): the scheduler stops
//   error set            BullMQ throws (pattern or tz rejected, or neither pattern nor every)
// BullMQ is the one pinned by the interop rig, tests/interop/node_modules (`npm ci` there).

// cron-parser reads a pattern without tz in the process's zone. Servers mostly run in UTC, and
// the vectors assume it, so pin it before anything loads luxon.
process.env.TZ = 'UTC';

const path = require('path');
const readline = require('readline');

const RIG = path.resolve(__dirname, '..', 'interop');
const bullmqEntry = require.resolve('bullmq', { paths: [RIG] });
const bullmq = require(bullmqEntry);

// The version of a package as seen from a directory (cron-parser: the copy bullmq loads).
function versionOf(name, fromDir) {
  return require(require.resolve(`${name}/package.json`, { paths: [fromDir] })).version;
}

function versions() {
  return {
    bullmq_package: 'bullmq',
    bullmq: versionOf('bullmq', RIG),
    'cron-parser': versionOf('cron-parser', path.dirname(bullmqEntry)),
    node: process.versions.node,
    node_tzdata: process.versions.tz || null,
    default_tz: process.env.TZ,
    clamp: false, // answers are the strategy's own, never max(next, ref)
  };
}

function messageOf(err) {
  return err && typeof err.message === 'string' && err.message ? err.message : String(err);
}

// One case in, one answer out.
function answer(input) {
  if (!input || typeof input !== 'object' || Array.isArray(input)) {
    return { next: null, error: 'bad input: expected a JSON object' };
  }
  if (typeof input.ref !== 'number' || !Number.isFinite(input.ref)) {
    return { next: null, error: 'bad input: ref must be epoch milliseconds' };
  }
  // The repeat options a BullMQ user would pass; absent and null fields are left out.
  const repeat = {};
  for (const key of ['pattern', 'tz', 'startDate', 'endDate', 'every']) {
    if (input[key] !== undefined && input[key] !== null) repeat[key] = input[key];
  }
  try {
    // upsertJobScheduler refuses options without a pattern or every (an empty pattern
    // included) before it computes anything; BullMQ's message, word for word.
    if (!repeat.pattern && !repeat.every) {
      throw new Error('Either .pattern or .every options must be defined for this repeatable job');
    }
    // A scheduler with a pattern calls defaultRepeatStrategy(max(now, prevMillis), opts);
    // every goes through BullMQ's exported getNextMillis (the real schedulers do that part
    // in Lua, so it is only a cross-check here).
    const next = repeat.every
      ? bullmq.getNextMillis(input.ref, repeat)
      : bullmq.defaultRepeatStrategy(input.ref, repeat);
    const found = typeof next === 'number' && !Number.isNaN(next);
    return { next: found ? next : null, error: null };
  } catch (err) {
    return { next: null, error: messageOf(err) };
  }
}

function main(argv) {
  if (argv.length === 1 && argv[0] === '--info') {
    process.stdout.write(JSON.stringify(versions()) + '\n');
    return;
  }
  if (argv.length) {
    process.stderr.write('usage: node bullmq_next_runs.js [--info] < cases.jsonl\n');
    process.exitCode = 2;
    return;
  }
  const out = [];
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on('line', (line) => {
    if (!line.trim()) return; // blank lines are not cases
    let input;
    try {
      input = JSON.parse(line);
    } catch (err) {
      out.push(JSON.stringify({ next: null, error: `bad input: ${messageOf(err)}` }));
      return;
    }
    out.push(JSON.stringify(answer(input)));
  });
  lines.on('close', () => process.stdout.write(out.length ? out.join('\n') + '\n' : ''));
}

main(process.argv.slice(2));
