'use strict';

// Differential tests: every scenario runs against this package's CircuitBreaker
// and against opossum@10.0.0 (a devDependency) under the same fake clock, and
// the two traces (events in order with their arguments, states, stats, promise
// outcomes after every step) must be identical.

const { test } = require('node:test');
const assert = require('node:assert');
const Opossum = require('opossum');
const CircuitBreaker = require('../lib/circuit_breaker');
const { run, randomScenario } = require('./opossum_harness');

async function same (scenario) {
  const ours = await run(CircuitBreaker, scenario);
  const theirs = await run(Opossum, scenario);
  assert.deepStrictEqual(ours, theirs);
  return ours;
}

const ok = i => ({ fire: ['ok', i] });
const fail = (code = 'E1') => ({ fire: ['fail', code] });
const tick = ms => ({ tick: ms });
const base = { timeout: false, enableSnapshots: false };

// The last state the trace recorded after a step.
function lastAfter (trace) {
  return trace.filter(e => e[0] === 'after').pop();
}

function eventNames (trace) {
  return trace.filter(e => typeof e[0] === 'string' && !['initial', 'after', 'json'].includes(e[0]))
    .map(e => e[0]);
}

test('threshold: just above errorThresholdPercentage opens', async () => {
  // 1 failure of 2 fires is 50%, not > 50; 2 of 3 is 66.7% > 50.
  const t = await same({ options: base, steps: [ok(0), fail(), fail()] });
  assert.deepStrictEqual(eventNames(t), ['fire', 'success', 'fire', 'failure', 'fire', 'failure', 'open', 'shutdown']);
});

test('threshold exactly at 50% never opens', async () => {
  const t = await same({ options: base, steps: [ok(0), fail(), ok(1), fail(), ok(2), fail()] });
  assert.ok(!eventNames(t).includes('open'));
});

test('fractional threshold compares with > on failures/fires*100', async () => {
  // 1/3*100 = 33.333333333333336 > 33.333333333333336 is false.
  await same({ options: { ...base, errorThresholdPercentage: 1 / 3 * 100 }, steps: [ok(0), ok(1), fail()] });
  await same({ options: { ...base, errorThresholdPercentage: 33 }, steps: [ok(0), ok(1), fail()] });
});

test('volumeThreshold not reached keeps the breaker closed', async () => {
  const t = await same({ options: { ...base, volumeThreshold: 3 }, steps: [fail(), fail(), fail(), fail()] });
  const names = eventNames(t);
  // fires 1,2 < 3: closed; the third failure (fires 3) opens; the fourth is rejected.
  assert.deepStrictEqual(names, ['fire', 'failure', 'fire', 'failure', 'fire', 'failure', 'open', 'fire', 'reject', 'shutdown']);
});

test('rejects count as fires and dilute the error rate', async () => {
  await same({ options: { ...base, resetTimeout: 100 }, steps: [fail(), ok(1), ok(2), tick(100), ok(3), fail(), fail()] });
});

test('bucket rotation drops old failures at Opossum\'s boundaries', async () => {
  const options = { ...base, rollingCountTimeout: 1000, rollingCountBuckets: 4 };
  // Ticks land before, on and after the 250 ms boundaries.
  const t = await same({
    options,
    steps: [ok(0), fail(), tick(249), fail(), tick(1), ok(1), tick(750), ok(2), fail(), tick(999), fail(), tick(1), fail()]
  });
  assert.ok(t.length > 0);
});

test('a rollingCountTimeout not divisible by the bucket count', async () => {
  await same({
    options: { ...base, rollingCountTimeout: 1000, rollingCountBuckets: 3 },
    steps: [ok(0), tick(333), fail(), tick(333), ok(1), tick(333), fail(), tick(1), fail(), tick(2), ok(2), { json: true }]
  });
});

test('half-open after resetTimeout fires its event with no call, admits one trial', async () => {
  const t = await same({
    options: { ...base, resetTimeout: 500 },
    steps: [fail(), tick(499), ok(1), tick(1), { fire: ['slow', 100, 'trial'] }, ok(2), ok(3), tick(100), ok(4)]
  });
  const names = eventNames(t);
  assert.ok(names.includes('halfOpen'));
  // The trial's success closes before its 'success' event reaches listeners.
  const close = names.indexOf('close');
  assert.strictEqual(names[close + 1], 'success');
});

test('half-open failure re-opens and re-arms the reset timer', async () => {
  await same({
    options: { ...base, resetTimeout: 500 },
    steps: [fail(), tick(500), fail(), ok(1), tick(499), ok(2), tick(1), ok(3), ok(4)]
  });
});

test('errorFilter: a filtered error counts as success, is still rejected, skips the fallback', async () => {
  const options = () => ({ ...base, errorFilter: (err, kind) => err.code === 'EFILTERED' && kind === 'fail' });
  const t = await same({ options, fallback: 'value', steps: [{ fire: ['fail', 'EFILTERED'] }, fail(), { fire: ['fail', 'EFILTERED'] }] });
  const outcomes = lastAfter(t)[3];
  assert.deepStrictEqual(outcomes, ['rejected:error:EFILTERED', 'resolved:fallback(3)', 'rejected:error:EFILTERED']);
  assert.strictEqual(lastAfter(t)[2].stats.successes, 2);
});

test('errorFilter success closes a half-open breaker', async () => {
  const options = () => ({ ...base, resetTimeout: 10, errorFilter: err => err.code === 'EFILTERED' });
  await same({ options, steps: [fail(), tick(10), { fire: ['fail', 'EFILTERED'] }, ok(1)] });
});

test('timeout counts as a failure, a late resolution after it is ignored', async () => {
  const t = await same({
    options: { timeout: 100, enableSnapshots: false },
    steps: [{ fire: ['slow', 150, 'late'] }, tick(99), tick(1), tick(50), ok(1)]
  });
  const names = eventNames(t);
  assert.deepStrictEqual(names.slice(0, 4), ['fire', 'timeout', 'failure', 'open']);
  assert.ok(!names.slice(0, 4).includes('success'));
});

test('timeout: a late rejection after the timeout is ignored too', async () => {
  await same({
    options: { timeout: 100, errorThresholdPercentage: 100, enableSnapshots: false },
    steps: [{ fire: ['slowfail', 200, 'ELATE'] }, tick(100), tick(100), ok(1)]
  });
});

test('timeout: false and 0 disable the timer', async () => {
  await same({ options: { timeout: false, enableSnapshots: false }, steps: [{ fire: ['slow', 20000, 'x'] }, tick(20000)] });
  await same({ options: { timeout: 0, enableSnapshots: false }, steps: [{ fire: ['slow', 20000, 'x'] }, tick(20000)] });
});

test('capacity: semaphoreLocked is counted and is a failure', async () => {
  await same({
    options: { ...base, capacity: 2, errorThresholdPercentage: 60 },
    fallback: 'value',
    steps: [{ fire: ['slow', 100, 1] }, { fire: ['slow', 100, 2] }, { fire: ['slow', 100, 3] }, tick(100), ok(4)]
  });
});

test('capacity slot is released on sync throw, failure and timeout', async () => {
  await same({
    options: { timeout: 50, capacity: 1, errorThresholdPercentage: 100, enableSnapshots: false },
    steps: [{ fire: ['throw', 'ESYNC'] }, fail(), { fire: ['slow', 100, 1] }, ok(2), tick(50), ok(3)]
  });
});

for (const kind of ['value', 'throw', 'reject', 'breaker']) {
  test(`fallback ${kind}: on failure and on rejection`, async () => {
    await same({ options: { ...base, resetTimeout: 100 }, fallback: kind, steps: [fail(), ok(1), tick(100), fail()] });
  });
}

test('disable runs the action unprotected but counts fires; enable restores protection', async () => {
  await same({
    options: base,
    steps: [fail(), { method: 'disable' }, fail(), ok(1), { fire: ['sync', 7] }, { method: 'enable' }, ok(2)]
  });
});

test('manual open and close, and open rearming half-open', async () => {
  await same({
    options: { ...base, resetTimeout: 300 },
    steps: [{ method: 'open' }, ok(1), { method: 'open' }, tick(200), { method: 'close' }, tick(200),
      ok(2), { method: 'open' }, tick(300), ok(3)]
  });
});

test('shutdown: event, then every call rejects with ESHUTDOWN', async () => {
  await same({ options: base, steps: [ok(1), { method: 'shutdown' }, ok(2), tick(20000)] });
});

test('warm-up suppresses opening for rollingCountTimeout', async () => {
  await same({
    options: { ...base, allowWarmUp: true, rollingCountTimeout: 1000 },
    steps: [fail(), fail(), tick(999), fail(), tick(1), fail(), ok(1)]
  });
});

test('state restore: open, half-open, closed disabled, shutdown', async () => {
  for (const state of [
    { closed: false, halfOpen: false },
    { closed: false, halfOpen: true },
    { closed: true, enabled: false },
    { shutdown: true },
    { closed: true, warmUp: true }
  ]) {
    await same({ options: { ...base, resetTimeout: 100, state }, steps: [ok(1), ok(2), tick(100), ok(3), fail()] });
  }
});

test('status restore from a saved stats object', async () => {
  await same({
    options: () => ({ ...base, status: { fires: 10, failures: 5, successes: 5, latencyTimes: [3, 1, 2] } }),
    steps: [fail(), { json: true }]
  });
});

test('sync actions and synchronous throws', async () => {
  await same({ options: base, steps: [{ fire: ['sync', 'v'] }, { fire: ['throw', 'ESYNC'] }, { fire: ['sync', 0] }, { call: ['ok', 1] }] });
});

test('latency statistics (mean, percentiles) match Opossum', async () => {
  await same({
    options: { timeout: 1000, enableSnapshots: false, errorThresholdPercentage: 100 },
    steps: [
      { fire: ['slow', 10, 1] }, { fire: ['slow', 30, 2] }, { fire: ['slowfail', 70, 'E'] }, tick(5), { fire: ['slow', 1200, 3] },
      tick(100), tick(1000), tick(200), { json: true }
    ]
  });
});

test('two calls settling in the same tick are counted in Opossum\'s order', async () => {
  // The failure is seen one microtask after the success, as with Opossum's
  // .then().catch(): the half-open trial below closes, then the failure of
  // the older call re-opens.
  await same({
    options: { ...base, resetTimeout: 100, errorThresholdPercentage: 100 },
    steps: [{ fire: ['slowfail', 150, 'EOLD'] }, { method: 'open' }, tick(100), { fire: ['slow', 50, 'trial'] }, tick(50)]
  });
});

test('cache: hits, misses, TTL expiry, size eviction, clearCache on shutdown', async () => {
  await same({
    options: { ...base, cache: true, cacheTTL: 100, cacheSize: 2 },
    steps: [ok(1), ok(1), ok(2), fail(), ok(1), tick(100), ok(1), ok(3), ok(2), ok(1), { fire: ['slow', 50, 9] }, { fire: ['slow', 50, 9] }, tick(50), { fire: ['slow', 50, 9] }]
  });
});

test('cache: a custom cacheGetKey and an open breaker still answer hits', async () => {
  await same({
    options: () => ({ ...base, cache: true, cacheGetKey: kind => kind }),
    steps: [ok(1), { method: 'open' }, ok(2), fail()]
  });
});

for (const coalesceResetOn of [undefined, ['error'], ['success', 'timeout']]) {
  test(`coalesce (reset on ${coalesceResetOn}): calls in flight share one promise`, async () => {
    await same({
      options: { timeout: 100, enableSnapshots: false, errorThresholdPercentage: 100, coalesce: true, coalesceTTL: 300, coalesceResetOn, capacity: 2 },
      steps: [{ fire: ['slow', 50, 1] }, { fire: ['slow', 50, 1] }, tick(50), { fire: ['slow', 50, 1] },
        { fire: ['slow', 150, 2] }, { fire: ['slow', 150, 3] }, tick(100), { fire: ['slow', 150, 2] }, fail('EC'), fail('EC'), tick(300), { fire: ['slow', 50, 1] }]
    });
  });
}

test('200 random scenarios match Opossum event for event', { timeout: 120000 }, async () => {
  for (let seed = 1; seed <= 200; seed++) {
    const scenario = randomScenario(seed);
    const ours = await run(CircuitBreaker, scenario);
    const theirs = await run(Opossum, scenario);
    assert.deepStrictEqual(ours, theirs, `seed ${seed}: ${JSON.stringify(scenario)}`);
  }
});
