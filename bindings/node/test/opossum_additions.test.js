'use strict';

// What this CircuitBreaker adds to or changes from Opossum 10: rejections with
// retryAt and no stack capture, validated options, refused unsupported
// options, and the few fixed Opossum quirks listed in docs/node.md.

const { test, mock } = require('node:test');
const assert = require('node:assert');
const Opossum = require('opossum');
const CircuitBreaker = require('../lib/circuit_breaker');

function withFakeClock (fn) {
  return async () => {
    mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 5_000_000 });
    try {
      await fn();
    } finally {
      mock.timers.reset();
    }
  };
}

const failing = () => Promise.reject(new Error('down'));

test('an open rejection carries code, retryAt = open instant + resetTimeout', withFakeClock(async () => {
  const b = new CircuitBreaker(failing, { resetTimeout: 3000, timeout: false });
  mock.timers.tick(1234); // the open instant differs from construction
  await assert.rejects(b.fire(), /down/);
  assert.ok(b.opened);
  mock.timers.tick(10);
  const err = await b.fire().then(() => null, e => e);
  assert.strictEqual(err.code, 'EOPENBREAKER');
  assert.strictEqual(err.message, 'Breaker is open');
  assert.strictEqual(err.retryAt, 5_000_000 + 1234 + 3000);
  assert.strictEqual(err.retryAfterMs, 3000 - 10, 'the time left');
  assert.ok(err instanceof Error);
  assert.ok(CircuitBreaker.isOurError(err));
  assert.strictEqual(b.toJSON().state.lastTimerAt, 5_000_000 + 1234);
  // Two rejections are two objects: each has its own retryAt.
  const again = await b.fire().then(() => null, e => e);
  assert.notStrictEqual(again, err);
  // At retryAt the breaker is half-open: the next call goes through.
  mock.timers.tick(err.retryAt - Date.now());
  assert.ok(b.halfOpen);
  b.shutdown();
}));

test('a re-open after a failed trial moves retryAt', withFakeClock(async () => {
  const b = new CircuitBreaker(failing, { resetTimeout: 1000, timeout: false });
  await b.fire().catch(() => {});
  mock.timers.tick(1000);
  await b.fire().catch(() => {}); // the trial fails at +1000
  const err = await b.fire().then(() => null, e => e);
  assert.strictEqual(err.retryAt, 5_000_000 + 2000);
  b.shutdown();
}));

test('a rejection captures no stack trace but still prints as an Error', async () => {
  const b = new CircuitBreaker(failing, { timeout: false });
  b.open();
  const err = await b.fire().then(() => null, e => e);
  // The stack is a fixed line, not frames of the caller.
  assert.ok(!err.stack.includes('at '), err.stack);
  assert.match(err.stack, /^Error: Breaker is open/);
  assert.ok(err instanceof Error);
  assert.strictEqual(String(err), 'Error: Breaker is open');
  // Serialized like Opossum's (own enumerable code), plus retryAt and retryAfterMs.
  assert.deepStrictEqual(Object.keys(err), ['code', 'retryAt', 'retryAfterMs']);
  assert.match(require('node:util').inspect(err), /^\[Error: Breaker is open/);
  // Errors from the action are not ours.
  assert.strictEqual(CircuitBreaker.isOurError(new Error('x')), false);
  assert.strictEqual(CircuitBreaker.isOurError(undefined), false);
  b.shutdown();
});

test('timeouts, shutdown and semaphore errors are ours with Opossum\'s codes', async () => {
  const b = new CircuitBreaker(() => new Promise(() => {}), { timeout: 1, capacity: 1, errorThresholdPercentage: 100 });
  const first = b.fire().then(() => null, e => e);
  const locked = await b.fire().then(() => null, e => e);
  assert.strictEqual(locked.code, 'ESEMLOCKED');
  assert.ok(CircuitBreaker.isOurError(locked));
  const timedOut = await first;
  assert.strictEqual(timedOut.code, 'ETIMEDOUT');
  assert.ok(CircuitBreaker.isOurError(timedOut));
  b.shutdown();
  const shut = await b.fire().then(() => null, e => e);
  assert.strictEqual(shut.code, 'ESHUTDOWN');
});

test('options are validated and the message names the option', () => {
  const cases = [
    [{ errorThresholdPercentage: 'x' }, 'errorThresholdPercentage must be a number, got "x"'],
    [{ timeout: '100' }, 'timeout must be a number, got "100"'],
    [{ timeout: -1 }, 'timeout must be >= 0, got -1'],
    [{ resetTimeout: NaN }, 'resetTimeout must be a number, got NaN'],
    [{ rollingCountBuckets: 2.5 }, 'rollingCountBuckets must be an integer, got 2.5'],
    [{ rollingCountBuckets: 0 }, 'rollingCountBuckets must be >= 1, got 0'],
    [{ rollingCountTimeout: 0 }, 'rollingCountTimeout must be >= 1, got 0'],
    [{ capacity: 1.5 }, 'capacity must be an integer, got 1.5'],
    [{ volumeThreshold: '3' }, 'volumeThreshold must be an integer, got "3"'],
    [{ errorFilter: 'no' }, 'errorFilter must be a function, got "no"']
  ];
  for (const [options, message] of cases) {
    assert.throws(() => new CircuitBreaker(failing, options), { name: 'TypeError', message });
  }
  assert.throws(() => new CircuitBreaker(failing, null), /options must be an object, got null/);
  assert.throws(() => new CircuitBreaker(undefined), /No action provided/);
});

test('the unsupported rotateBucketController is refused by name, never ignored', () => {
  assert.throws(() => new CircuitBreaker(failing, { rotateBucketController: new (require('events'))() }),
    { name: 'TypeError', message: /^option rotateBucketController is not supported/ });
});

test('a cacheTransport without get/set/flush is refused, a custom one is used', async () => {
  assert.throws(() => new CircuitBreaker(failing, { cache: true, cacheTransport: { get () {} } }),
    { name: 'TypeError', message: /cacheTransport should be an object with `get`, `set` and `flush`/ });
  const store = new Map();
  const transport = { get: k => store.get(k), set: (k, v) => store.set(k, v), flush: () => store.clear() };
  let calls = 0;
  const b = new CircuitBreaker(async x => { calls++; return x; }, { cache: true, cacheTransport: transport });
  assert.strictEqual(await b.fire(1), 1);
  assert.strictEqual(await b.fire(1), 1);
  assert.strictEqual(calls, 1);
  assert.deepStrictEqual([...store.keys()], ['[1]']);
  b.clearCache();
  assert.strictEqual(store.size, 0);
  b.shutdown();
});

test('a sync action returning undefined is a success (Opossum counts a TypeError failure)', async () => {
  const b = new CircuitBreaker(() => undefined, { timeout: false });
  assert.strictEqual(await b.fire(), undefined);
  assert.strictEqual(b.stats.successes, 1);
  assert.strictEqual(b.stats.failures, 0);
  const o = new Opossum(() => undefined, { timeout: false });
  await assert.rejects(o.fire(), TypeError);
  o.shutdown();
  b.shutdown();
});

test('a disabled breaker whose action throws rejects instead of throwing', async () => {
  const b = new CircuitBreaker(() => { throw new Error('sync'); }, { enabled: false });
  await assert.rejects(b.fire(), /sync/);
  b.shutdown();
});

test('the caller\'s options object is not mutated; options holds the defaults', () => {
  const options = { timeout: 50 };
  const b = new CircuitBreaker(failing, options);
  assert.deepStrictEqual(options, { timeout: 50 });
  assert.strictEqual(b.options.resetTimeout, 30000);
  assert.strictEqual(b.options.errorThresholdPercentage, 50);
  b.shutdown();
});

test('restoring an open state keeps the original reopen instant', withFakeClock(async () => {
  const a = new CircuitBreaker(failing, { resetTimeout: 1000, timeout: false });
  mock.timers.tick(100);
  a.open();
  const { state } = a.toJSON();
  a.shutdown();
  mock.timers.tick(400);
  const b = new CircuitBreaker(failing, { resetTimeout: 1000, timeout: false, state });
  assert.ok(b.opened);
  mock.timers.tick(599);
  assert.ok(b.opened);
  mock.timers.tick(1);
  assert.ok(b.halfOpen);
  b.shutdown();
}));

test('snapshot events come at Opossum\'s instants with the same stats', withFakeClock(async () => {
  const record = async Impl => {
    const b = new Impl(x => (x ? Promise.reject(new Error('e')) : Promise.resolve(1)),
      { rollingCountTimeout: 1000, rollingCountBuckets: 4, timeout: false, errorThresholdPercentage: 100 });
    const seen = [];
    for (let ms = 0; ms < 130; ms++) mock.timers.tick(1);
    b.status.on('snapshot', s => seen.push([Date.now(), s.fires, s.failures, s.successes]));
    for (let i = 0; i < 12; i++) {
      await b.fire(i % 3 === 0).catch(() => {});
      for (let ms = 0; ms < 97; ms++) mock.timers.tick(1);
    }
    const window = b.status.window.map(w => [w.fires, w.failures, w.successes, w.latencyTimes.length]);
    b.shutdown();
    return { seen, window };
  };
  const ours = await record(CircuitBreaker);
  mock.timers.reset();
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 5_000_000 });
  const theirs = await record(Opossum);
  assert.ok(ours.seen.length > 3);
  assert.deepStrictEqual(ours, theirs);
}));

test('enableSnapshots: false emits no snapshot', withFakeClock(async () => {
  const b = new CircuitBreaker(failing, { enableSnapshots: false });
  let n = 0;
  b.status.on('snapshot', () => n++);
  for (let ms = 0; ms < 3000; ms += 100) mock.timers.tick(100);
  assert.strictEqual(n, 0);
  b.shutdown();
}));

test('healthCheck failure opens the breaker; abortController is aborted on timeout', async () => {
  const controller = new AbortController();
  const b = new CircuitBreaker(() => new Promise(() => {}), { timeout: 1, abortController: controller, errorThresholdPercentage: 100 });
  await b.fire().catch(() => {});
  assert.ok(controller.signal.aborted);
  assert.strictEqual(b.getSignal(), controller.signal);
  let failed = null;
  b.on('healthCheckFailed', e => { failed = e; });
  b.healthCheck(() => Promise.reject(new Error('unhealthy')), 60000);
  await new Promise(resolve => setImmediate(resolve));
  assert.strictEqual(failed.message, 'unhealthy');
  assert.ok(b.opened);
  b.shutdown();
});

test('no listener, no emit: a breaker with no listeners still counts everything', async () => {
  const b = new CircuitBreaker(x => (x ? Promise.reject(new Error('e')) : Promise.resolve(1)), { timeout: false });
  await b.fire(false);
  await b.fire(true).catch(() => {});
  await b.fire(true).catch(() => {});
  await b.fire(false).catch(() => {});
  const s = b.stats;
  assert.deepStrictEqual([s.fires, s.successes, s.failures, s.rejects], [4, 1, 2, 1]);
  assert.ok(b.opened);
  b.shutdown();
});

test('fire runs the action with this = the action, call with the given context', async () => {
  function action () { return Promise.resolve(this); }
  const b = new CircuitBreaker(action, { timeout: false });
  assert.strictEqual(await b.fire(), action);
  const ctx = { name: 'ctx' };
  assert.strictEqual(await b.call(ctx), ctx);
  b.shutdown();
});

test('a non-function action resolves to itself, as in Opossum', async () => {
  const b = new CircuitBreaker({ answer: 42 }, { timeout: false });
  assert.deepStrictEqual(await b.fire(), { answer: 42 });
  b.shutdown();
});
