'use strict';
// BullMQ 6.7 side of bench_cron.py: microseconds per next-run computation, one JSON line.
//   node bench_cron.js < cases.json     cases: {"rounds": R, "refs": [...], "cases": [{label, pattern, tz}]}
// Times BullMQ's own exported strategy, defaultRepeatStrategy(ref, {pattern, tz}): what
// upsertJobScheduler and the worker call for a pattern scheduler (cron-parser 5.10.3 inside).
process.env.TZ = 'UTC'; // a case without tz is read in the process zone: make it UTC, as ours
const { defaultRepeatStrategy } = require('bullmq');

function main(input) {
  const { rounds, refs, cases } = JSON.parse(input);
  const out = {};
  for (const c of cases) {
    const opts = c.tz ? { pattern: c.pattern, tz: c.tz } : { pattern: c.pattern };
    for (let i = 0; i < 200; i++) defaultRepeatStrategy(refs[i % refs.length], opts); // JIT warm-up
    const perRound = [];
    let sink = 0;
    for (let r = 0; r < rounds; r++) {
      const t0 = process.hrtime.bigint();
      for (const ref of refs) sink += defaultRepeatStrategy(ref, opts) || 0;
      perRound.push(Number(process.hrtime.bigint() - t0) / 1e3 / refs.length);
    }
    perRound.sort((a, b) => a - b);
    out[c.label] = { us: perRound[Math.floor(perRound.length / 2)], sink: sink % 1000 };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

let data = '';
process.stdin.on('data', (chunk) => { data += chunk; });
process.stdin.on('end', () => main(data));
