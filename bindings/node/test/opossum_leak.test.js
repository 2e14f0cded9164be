'use strict';

// A long fire loop must not grow the heap: per-call state (timers, closures,
// latency samples of rotated-out buckets) has to be released. The loop runs
// in a child process started with --expose-gc so global.gc() is available
// whatever flags `node --test` was given.

const { test } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const LOOP = `
const CircuitBreaker = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'circuit_breaker.js'))});
const b = new CircuitBreaker(async x => x, { rollingCountTimeout: 100, rollingCountBuckets: 10 });
const fail = new CircuitBreaker(async () => { throw new Error('e'); }, { resetTimeout: 60000 });
async function batch (n) {
  for (let i = 0; i < n; i++) {
    await b.fire(i);
    await fail.fire().catch(() => {}); // one failure, then open rejections
  }
}
(async () => {
  await batch(100000);
  global.gc();
  const before = process.memoryUsage().heapUsed;
  await batch(500000);
  global.gc();
  const after = process.memoryUsage().heapUsed;
  process.stdout.write(JSON.stringify({ before, after, fires: b.stats.fires }));
  b.shutdown();
  fail.shutdown();
})();
`;

test('1e6 fires keep the heap bounded', { timeout: 120000 }, () => {
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', LOOP], { encoding: 'utf8' });
  const { before, after } = JSON.parse(out);
  // Latency samples of the last 100 ms are all that legitimately stays; 8 MB
  // is far below what keeping one object per call (~500k calls) would take.
  assert.ok(after - before < 8 * 1024 * 1024, `heap grew from ${before} to ${after}`);
});
