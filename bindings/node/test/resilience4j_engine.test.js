'use strict';
// new CircuitBreaker(action, { resilience4j }): Opossum's API, the C++
// core's decisions. Time is a ManualClock (the core's) and, for the timeout,
// node:test's fake timers; nothing sleeps.
const { test, mock } = require('node:test');
const assert = require('node:assert/strict');
const { CircuitBreaker, ManualClock } = require('..');

const T = { timeout: 10000 };

const base = {
  failureRateThreshold: 50,
  slidingWindowSize: 4,
  minimumNumberOfCalls: 4,
  waitDurationInOpenState: '10s',
  permittedNumberOfCallsInHalfOpenState: 1,
};

// The action: fire(true) fails, fire(false) succeeds; fire(p) with a promise
// settles as it does (a call kept in flight).
function action(x) {
  if (x === true) return Promise.reject(new Error('down'));
  if (x instanceof Promise) return x;
  return Promise.resolve('ok');
}

function r4j(config = base, extra = {}) {
  const clock = new ManualClock();
  const events = [];
  const b = new CircuitBreaker(action, { timeout: false, clock, resilience4j: config, ...extra });
  for (const e of ['open', 'halfOpen', 'close']) b.on(e, () => events.push(e));
  return { b, clock, events };
}

async function run(b, outcomes) {
  for (const fail of outcomes) await b.fire(fail).catch(() => {});
}

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

test('opens at the Resilience4j threshold (>=, after minimumNumberOfCalls) where Opossum would not', T, async () => {
  const { b } = r4j();
  await run(b, [false, false, true, true]);  // 50 % of 4: >= 50 opens
  assert.equal(b.opened, true);
  assert.equal(b.core.state, 'OPEN');
  assert.equal(b.core.metrics().failureRate, 50);
  // The same calls on Opossum's rule (strictly above 50 %) stay closed.
  const opossum = new CircuitBreaker(action, { timeout: false, errorThresholdPercentage: 50, volumeThreshold: 4 });
  await run(opossum, [false, false, true, true]);
  assert.equal(opossum.closed, true);
  assert.equal(opossum.core, undefined, 'the Opossum path has no core');
  opossum.shutdown();

  // minimumNumberOfCalls: three failures out of three do not open yet ...
  const { b: few } = r4j();
  await run(few, [true, true, true]);
  assert.equal(few.closed, true);
  assert.equal(few.core.metrics().failureRate, -1);
  // ... where Opossum's default volumeThreshold (0) opens at the first.
  const eager = new CircuitBreaker(action, { timeout: false });
  await run(eager, [true]);
  assert.equal(eager.opened, true);
  eager.shutdown();
  await run(few, [true]);
  assert.equal(few.opened, true);
  // Below the threshold: 1 failure in 4 stays closed.
  const { b: below } = r4j();
  await run(below, [false, false, false, true]);
  assert.equal(below.closed, true);
  assert.deepEqual([b.stats.fires, b.stats.successes, b.stats.failures], [4, 2, 2], 'Status still counts');
});

test('a rejection: EOPENBREAKER, retryAt in epoch ms from the core, no stack, action not called', T, async () => {
  const { b, clock } = r4j();
  await run(b, [true, true, true, true]);
  clock.advance(3000);
  let called = 0;
  const refused = new CircuitBreaker(() => { called++; }, { clock, resilience4j: base });
  refused.open();
  const before = Date.now();
  const err = await b.fire(false).then(() => null, (e) => e);
  const after = Date.now();
  assert.equal(err.code, 'EOPENBREAKER');
  assert.ok(err instanceof Error);
  assert.ok(CircuitBreaker.isOurError(err));
  // 10 s open, 3 s of it gone on the core clock: 7 s from now, in epoch ms.
  assert.ok(err.retryAt >= before + 7000 && err.retryAt <= after + 7000,
            `retryAt ${err.retryAt} not now + 7000 (${before}..${after})`);
  assert.equal(err.retryAfterMs, 7000, 'the time left, on the core clock');
  assert.doesNotMatch(err.stack, /\n\s+at /, 'no stack frames');
  assert.equal(b.stats.rejects, 1);
  assert.equal(b.core.metrics().notPermittedCalls, 1);
  await refused.fire().catch(() => {});
  assert.equal(called, 0);
  assert.equal(refused.stats.rejects, 1);
});

test('waits waitDurationInOpenState, admits one probe; its success closes (open, halfOpen, close)', T, async () => {
  const { b, clock, events } = r4j();
  await run(b, [true, true, true, true]);
  clock.advance(10000);
  await assert.rejects(b.fire(false), { code: 'EOPENBREAKER' }, 'the wait is not over at exactly 10 s');
  clock.advance(1);
  assert.equal(b.opened, true, 'OPEN -> HALF_OPEN is lazy: on the next call');
  const probe = deferred();
  const probeCall = b.fire(probe.promise);
  assert.equal(b.halfOpen, true);
  assert.deepEqual(events, ['open', 'halfOpen']);
  const second = await b.fire(false).then(() => null, (e) => e);
  assert.equal(second.code, 'EOPENBREAKER', 'a second concurrent call is refused');
  assert.equal(second.retryAt, Infinity, 'the core cannot say when');
  assert.equal(second.retryAfterMs, Infinity);
  probe.resolve('probed');
  assert.equal(await probeCall, 'probed');
  assert.equal(b.closed, true);
  assert.deepEqual(events, ['open', 'halfOpen', 'close']);
  assert.equal(await b.fire(false), 'ok');
});

test('a failed probe re-opens for another full wait', T, async () => {
  const { b, clock, events } = r4j();
  await run(b, [true, true, true, true]);
  clock.advance(10001);
  await assert.rejects(b.fire(true), /down/);
  assert.equal(b.opened, true);
  assert.deepEqual(events, ['open', 'halfOpen', 'open']);
  const before = Date.now();
  const err = await b.fire(false).then(() => null, (e) => e);
  assert.ok(err.retryAt >= before + 10000 - 1 && err.retryAt <= Date.now() + 10000);
});

test('slowCallDurationThreshold: the duration is measured on the core clock', T, async () => {
  const config = { ...base, slowCallDurationThreshold: '1s', slowCallRateThreshold: 50 };
  const clock = new ManualClock();
  const taking = (ms) => async () => { clock.advance(ms); return 'ok'; };
  const slow = new CircuitBreaker(taking(2000), { timeout: false, clock, resilience4j: config });
  for (let i = 0; i < 4; i++) assert.equal(await slow.fire(), 'ok');
  assert.equal(slow.opened, true, 'four slow successes open');
  assert.equal(slow.core.metrics().slowCalls, 4);
  const quick = new CircuitBreaker(taking(500), { timeout: false, clock, resilience4j: config });
  for (let i = 0; i < 4; i++) await quick.fire();
  assert.equal(quick.closed, true);
  assert.equal(quick.core.metrics().slowCalls, 0);
});

test('errorFilter: a filtered error is not an outcome (the permit is released)', T, async () => {
  const notFound = Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  let fail = notFound;
  const clock = new ManualClock();
  const b = new CircuitBreaker(() => Promise.reject(fail), {
    timeout: false, clock, resilience4j: base, errorFilter: (e) => e.code === 'ENOTFOUND',
  });
  for (let i = 0; i < 8; i++) await assert.rejects(b.fire(), /not found/, 'still rejected with it');
  assert.equal(b.closed, true);
  assert.equal(b.core.metrics().bufferedCalls, 0, 'nothing recorded');
  assert.equal(b.stats.successes, 8, 'Opossum counts it a success');
  // In HALF_OPEN a filtered error gives the probe back: another may go.
  b.open();
  clock.advance(10001);
  await assert.rejects(b.fire(), /not found/);
  assert.equal(b.halfOpen, true);
  fail = new Error('down');
  await assert.rejects(b.fire(), /down/, 'a new probe is admitted');
  assert.equal(b.opened, true);
});

test('timeout: a timed-out call is a failure for the core', T, async () => {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  try {
    const clock = new ManualClock();
    const b = new CircuitBreaker(() => new Promise(() => {}), { timeout: 500, clock, resilience4j: base });
    const calls = [];
    for (let i = 0; i < 4; i++) calls.push(b.fire().then(() => null, (e) => e));
    mock.timers.tick(500);
    for (const e of await Promise.all(calls)) assert.equal(e.code, 'ETIMEDOUT');
    assert.equal(b.core.metrics().failedCalls, 4);
    assert.equal(b.opened, true);
    assert.equal(b.stats.timeouts, 4);
    b.shutdown();
  } finally {
    mock.timers.reset();
  }
});

test('capacity: a call over it is ESEMLOCKED and a failure, as on the Opossum path', T, async () => {
  const { b } = r4j(base, { capacity: 1 });
  const held = deferred();
  const first = b.fire(held.promise);
  await assert.rejects(b.fire(false), { code: 'ESEMLOCKED' });
  assert.equal(b.stats.semaphoreRejections, 1);
  assert.equal(b.core.metrics().failedCalls, 1);
  held.resolve('done');
  assert.equal(await first, 'done');
  assert.equal(b.core.pendingPermits, 0, 'every permit was given back');
});

test('open(), close(), disable(), enable() drive the core; getters and toJSON read it', T, async () => {
  const { b, events } = r4j();
  b.open();
  assert.equal(b.core.state, 'OPEN');
  assert.deepEqual([b.opened, b.closed, b.halfOpen], [true, false, false]);
  assert.equal(b.toJSON().state.coreState, 'OPEN');
  assert.equal(b.toJSON().state.open, true);
  b.close();
  assert.equal(b.core.state, 'CLOSED');
  assert.deepEqual(events, ['open', 'close']);
  b.disable();
  assert.equal(b.core.state, 'DISABLED');
  await run(b, [true, true, true, true, true]);
  assert.equal(b.closed, true, 'disabled: nothing opens it');
  b.enable();
  assert.equal(b.core.state, 'CLOSED');
  b.open();
  b.enable();
  assert.equal(b.core.state, 'OPEN', 'enable() of an enabled breaker changes nothing');
  b.shutdown();
  assert.equal(b.isShutdown, true);
  assert.equal(b.closed, false);
  await assert.rejects(b.fire(false), { code: 'ESHUTDOWN' });
});

test('automaticTransitionFromOpenToHalfOpenEnabled: HALF_OPEN on the clock', T, async () => {
  const { b, clock, events } = r4j({ ...base, automaticTransitionFromOpenToHalfOpenEnabled: true });
  await run(b, [true, true, true, true]);
  clock.advance(10000);
  assert.equal(b.halfOpen, true, 'without a call');
  await b.fire(false);
  assert.deepEqual(events, ['open', 'halfOpen', 'close']);
});

test('bad resilience4j options throw, naming the option', T, () => {
  const cases = [
    [{ failureRateTreshold: 50 }, TypeError, /resilience4j: unknown property "failureRateTreshold"/],
    [{ failureRateThreshold: 150 }, RangeError, /resilience4j\.failureRateThreshold/],
    [{ waitDurationInOpenState: '5 seconds' }, TypeError, /resilience4j\.waitDurationInOpenState/],
    ['fifty', TypeError, /resilience4j must be an object/],
  ];
  for (const [config, type, re] of cases) {
    assert.throws(() => new CircuitBreaker(action, { resilience4j: config }),
                  (e) => e instanceof type && re.test(e.message), JSON.stringify(config));
  }
  assert.throws(() => new CircuitBreaker(action, { resilience4j: {}, clock: {} }),
                /options\.clock must be a ManualClock/);
});

test('Opossum options that would decide are refused with resilience4j, by name', T, () => {
  for (const name of ['errorThresholdPercentage', 'volumeThreshold', 'resetTimeout', 'allowWarmUp',
    'rollingCountTimeout', 'rollingCountBuckets']) {
    assert.throws(() => new CircuitBreaker(action, { resilience4j: {}, [name]: 10 }),
                  (e) => e instanceof TypeError && e.message.startsWith(`option ${name} cannot`), name);
  }
  assert.throws(() => new CircuitBreaker(action, { resilience4j: {}, resetTimeout: 1, volumeThreshold: 2 }),
                /options volumeThreshold, resetTimeout cannot be combined with options\.resilience4j/);
  // The rest of Opossum's options still apply.
  const b = new CircuitBreaker(action, { resilience4j: {}, timeout: 1000, capacity: 3, name: 'svc' });
  assert.ok(b instanceof CircuitBreaker);
  assert.equal(b.core.name, 'svc');
  b.shutdown();
});

test('the state option restores into the core', T, async () => {
  const { b } = r4j();
  b.open();
  const saved = b.toJSON().state;
  const clock = new ManualClock();
  const restored = new CircuitBreaker(action, { timeout: false, clock, resilience4j: base, state: saved });
  assert.equal(restored.core.state, 'OPEN');
  await assert.rejects(restored.fire(false), { code: 'EOPENBREAKER' });
  clock.advance(10001);
  assert.equal(await restored.fire(false), 'ok', 'a full wait from the restore, then a probe');
  assert.equal(restored.closed, true);
  const off = new CircuitBreaker(action, { clock, resilience4j: base, state: { ...saved, enabled: false } });
  assert.equal(off.core.state, 'DISABLED');
  const gone = new CircuitBreaker(action, { clock, resilience4j: base, state: { shutdown: true } });
  assert.equal(gone.isShutdown, true);
  const disabled = new CircuitBreaker(action, { clock, resilience4j: base, enabled: false });
  assert.equal(disabled.core.state, 'DISABLED');
});

test('cache and coalesce keep Opossum\'s order: the cache answers before the core is asked', T, async () => {
  let calls = 0;
  const clock = new ManualClock();
  const b = new CircuitBreaker(async (x) => { calls++; return x * 2; },
                               { timeout: false, clock, resilience4j: base, cache: true });
  assert.equal(await b.fire(21), 42);
  b.open();
  assert.equal(await b.fire(21), 42, 'a cache hit while OPEN');
  await assert.rejects(b.fire(1), { code: 'EOPENBREAKER' }, 'a miss asks the core');
  assert.equal(calls, 1);
  assert.equal(b.core.metrics().notPermittedCalls, 1);
  assert.equal(b.core.pendingPermits, 0);
});
