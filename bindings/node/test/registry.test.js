'use strict';
// Registry: keyed breakers with bounded memory, run() recording outcomes and
// rejecting with a cheap OpenBreakerError.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Registry, ManualClock, OpenBreakerError } = require('..');

const T = { timeout: 10000 };
const defaults = {
  failureRateThreshold: 50, slidingWindowSize: 4, minimumNumberOfCalls: 4,
  waitDurationInOpenState: '10s', permittedNumberOfCallsInHalfOpenState: 1,
};
const fail = () => { throw new Error('boom'); };

test('run() resolves sync and async actions and records their outcomes', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ defaults, clock });
  assert.equal(await r.run('a', () => 7), 7);
  assert.equal(await r.run('a', async () => 8), 8);
  await assert.rejects(r.run('a', fail), /boom/);
  await assert.rejects(r.run('a', async () => { throw new Error('async boom'); }), /async boom/);
  const m = r.metrics('a');
  assert.equal(m.bufferedCalls, 4);
  assert.equal(m.failedCalls, 2);
  assert.equal(r.state('a'), 'OPEN', '2 of 4 failed: 50 %');
  assert.equal(r.state('b'), undefined);
});

test('a rejection is an OpenBreakerError with code and retryAt, and the action is not run', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ defaults, clock });
  for (let i = 0; i < 4; i++) await assert.rejects(r.run('k', fail));
  const openedAt = clock.nowMs();
  clock.advance(2500);
  let ran = false;
  const err = await r.run('k', () => { ran = true; }).then(() => null, (e) => e);
  assert.equal(ran, false);
  assert.ok(err instanceof OpenBreakerError);
  assert.ok(err instanceof Error);
  assert.equal(err.code, 'EOPENBREAKER');
  assert.equal(err.key, 'k');
  assert.equal(err.retryAt, openedAt + 10000);
  assert.equal(err.retryAfterMs, 7500, 'the time left: 10 s less the 2.5 s gone');
  assert.equal(err.name, 'OpenBreakerError');
  assert.equal(err.stack.split('\n').length, 1, 'no stack frames captured');
  // Other keys are unaffected.
  assert.equal(await r.run('other', () => 'ok'), 'ok');
  // After the wait, one probe closes it again.
  clock.advance(7501);
  assert.equal(await r.run('k', () => 'probe'), 'probe');
  assert.equal(r.state('k'), 'CLOSED');
});

test('durations come from the registry clock: slow calls count', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ clock, defaults: { ...defaults, slowCallDurationThreshold: '1s', slowCallRateThreshold: 50 } });
  for (let i = 0; i < 4; i++) {
    await r.run('slow', async () => { clock.advance(1500); });
  }
  assert.equal(r.state('slow'), 'OPEN');
});

test('maxBreakers bounds the registry: the least recently used idle breaker goes', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ maxBreakers: 2, maxBreakersHard: 2, defaults, clock });
  await r.run('a', () => 1);
  await r.run('b', () => 1);
  assert.equal(r.size, 2);
  await r.run('c', () => 1);
  assert.equal(r.size, 2);
  assert.deepEqual(r.keys().sort(), ['b', 'c']);
  assert.equal(r.state('a'), undefined);
  // An OPEN breaker is protected: it stays while the others go.
  for (let i = 0; i < 4; i++) await assert.rejects(r.run('b', fail));
  await r.run('d', () => 1);
  assert.ok(r.keys().includes('b'));
  assert.equal(r.state('b'), 'OPEN');
});

test('idleTtlMs drops breakers not used for that long', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ idleTtlMs: 60000, sweepIntervalMs: 1000, defaults, clock });
  await r.run('x', () => 1);
  clock.advance(59000);
  assert.equal(r.sweep(), 0);
  clock.advance(2000);
  assert.equal(r.sweep(), 1);
  assert.equal(r.size, 0);
});

test('defaults change behaviour', T, async () => {
  const clock = new ManualClock();
  const strict = new Registry({ clock, defaults: { ...defaults, failureRateThreshold: 25 } });
  const lenient = new Registry({ clock, defaults: { ...defaults, failureRateThreshold: 75 } });
  for (const r of [strict, lenient]) {
    for (const f of [fail, fail, () => 1, () => 1]) await r.run('k', f).catch(() => {});
  }
  assert.equal(strict.state('k'), 'OPEN');
  assert.equal(lenient.state('k'), 'CLOSED');
});

test('bad options and arguments throw, naming them', T, async () => {
  assert.throws(() => new Registry({ maxBreakers: 0 }), (e) => e instanceof RangeError && /options\.maxBreakers/.test(e.message));
  assert.throws(() => new Registry({ idleTtlMs: -1 }), /options\.idleTtlMs/);
  assert.throws(() => new Registry({ defaults: { slidingWindowSize: -3 } }), /defaults\.slidingWindowSize/);
  assert.throws(() => new Registry({ defaults: { nope: 1 } }), /defaults: unknown property "nope"/);
  assert.throws(() => new Registry({ clock: 1 }), /options\.clock must be a ManualClock/);
  const r = new Registry();
  await assert.rejects(r.run('', () => 1), /key must not be empty/);
  await assert.rejects(r.run(42, () => 1), /key must be a string/);
  await assert.rejects(r.run('k'), TypeError);
  const long = 'k'.repeat(1000);
  assert.equal(await r.run(long, () => 'long keys work'), 'long keys work');
  assert.ok(r.keys().includes(long));
});

test('a result whose then getter throws is a failure, and the call is finished', T, async () => {
  const r = new Registry({ defaults, clock: new ManualClock() });
  const hostile = () => ({ get then() { throw new Error('then getter'); } });
  for (let i = 0; i < 4; i++) await assert.rejects(r.run('h', hostile), /then getter/);
  assert.equal(r.state('h'), 'OPEN', 'four failures recorded');
  // A thenable that never settles keeps its breaker in use (not evicted).
  const small = new Registry({ maxBreakers: 1, maxBreakersHard: 2, defaults, clock: new ManualClock() });
  small.run('pending', () => new Promise(() => {}));
  await small.run('b', () => 1);
  await small.run('c', () => 1);
  assert.ok(small.keys().includes('pending'));
});

test('run() options: errorFilter leaves an error uncounted, openForMs opens for the time it names', T, async () => {
  const clock = new ManualClock();
  const r = new Registry({ defaults, clock });
  const notFound = Object.assign(new Error('not found'), { status: 404 });
  const options = { errorFilter: (e) => e.status === 404 };
  for (let i = 0; i < 6; i++) await assert.rejects(r.run('f', () => { throw notFound; }, options), /not found/);
  assert.equal(r.metrics('f').bufferedCalls, 0, 'filtered errors are not counted');
  assert.equal(r.state('f'), 'CLOSED');
  // The same errors unfiltered open it.
  for (let i = 0; i < 4; i++) await assert.rejects(r.run('f', () => { throw notFound; }));
  assert.equal(r.state('f'), 'OPEN');

  // One failure with a recovery time opens at once, for that time (not the 10 s wait).
  const quota = Object.assign(new Error('quota'), { retryAfterMs: 120_000 });
  const openFor = { openForMs: (e) => e.retryAfterMs };
  await assert.rejects(r.run('q', () => { throw quota; }, openFor), /quota/);
  assert.equal(r.state('q'), 'OPEN');
  const refused = await r.run('q', () => 'x').then(() => null, (e) => e);
  assert.equal(refused.retryAt, clock.nowMs() + 120_000);
  assert.equal(refused.retryAfterMs, 120_000);
  clock.advance(119_999);
  await assert.rejects(r.run('q', () => 'x'), { code: 'EOPENBREAKER' });
  clock.advance(2);
  assert.equal(await r.run('q', () => 'probe'), 'probe');
  // 0 or undefined: an ordinary failure.
  await assert.rejects(r.run('z', () => { throw new Error('plain'); }, { openForMs: () => undefined }));
  assert.equal(r.state('z'), 'CLOSED');
  assert.equal(r.metrics('z').failedCalls, 1);

  await assert.rejects(r.run('k', () => 1, { errorFilter: 3 }), /options.errorFilter must be a function/);
  await assert.rejects(r.run('k', () => 1, { openForMs: 'soon' }), /options.openForMs must be a function/);
  // A filter that throws frees the permit and rejects with its own error.
  await assert.rejects(r.run('t', () => { throw new Error('x'); }, { errorFilter: () => { throw new Error('bad filter'); } }), /bad filter/);
  assert.equal(r.metrics('t').failedCalls, 1);
});
