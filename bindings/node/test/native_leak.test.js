'use strict';

// The native side must not grow either: a permit slot, a breaker borrowed
// from the registry, a ProviderError built from a Meta response — each call
// allocates on both heaps, and a slot or a reference kept per call shows as
// RSS growth long before the JS heap notices. Run in a child process with
// --expose-gc; measured after a warm-up, so that slot tables, the registry's
// table and V8's code are at their steady size.

const { test } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const LOOP = `
const fb = require(${JSON.stringify(path.join(__dirname, '..'))});
const clock = new fb.ManualClock();
const registry = new fb.Registry({ clock, maxBreakers: 64, defaults: {
  slidingWindowSize: 10, minimumNumberOfCalls: 10, waitDurationInOpenState: 1 } });
const quota = { status: 400, headers: {}, body: '{"error":{"code":4,"message":"limit"}}' };
async function batch(n) {
  for (let i = 0; i < n; i++) {
    const key = 'k' + (i % 200);  // more keys than maxBreakers: breakers come and go
    await registry.run(key, async () => i);
    await registry.run(key, () => { throw new Error('e'); }).catch(() => {});
    await fb.runProviderCall(registry, 'provider:instagram:read:' + (i % 50), async () => {
      throw Object.assign(new Error('quota'), { response: quota });
    }).catch(() => {});
    clock.advance(2);
  }
}
(async () => {
  await batch(20000);
  global.gc();
  const before = process.memoryUsage();
  await batch(100000);
  global.gc();
  const after = process.memoryUsage();
  process.stdout.write(JSON.stringify({ before, after, size: registry.size }));
})();
`;

test('300k native calls keep the heap and the RSS bounded', { timeout: 180000 }, () => {
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', LOOP], { encoding: 'utf8' });
  const { before, after, size } = JSON.parse(out);
  assert.ok(size <= 64 * 4, `the registry holds ${size} breakers`);
  // One leaked permit slot or breaker per call would be ~100 bytes x 300k =
  // 30 MB; a leaked Error per call more. 16 MB of RSS leaves room for the
  // allocator's and V8's own growth.
  assert.ok(after.heapUsed - before.heapUsed < 8 * 1024 * 1024,
    `heap grew from ${before.heapUsed} to ${after.heapUsed}`);
  assert.ok(after.rss - before.rss < 16 * 1024 * 1024, `RSS grew from ${before.rss} to ${after.rss}`);
});
