'use strict';
// CoreBreaker: fusebox's CircuitBreaker decisions from JS, time driven by a
// ManualClock (no sleeps).
const test = require('node:test');
const assert = require('node:assert/strict');
const { CoreBreaker, ManualClock } = require('..');

const T = { timeout: 10000 };

function breaker(config, clock = new ManualClock()) {
  return { clock, b: new CoreBreaker(config, { clock }) };
}

// A permit slot, asserting the call is permitted.
function acquire(b, what = 'the call') {
  const slot = b.tryAcquire();
  assert.ok(Number.isInteger(slot) && slot >= 0, `${what} should be permitted in ${b.state}, got ${slot}`);
  return slot;
}

// `n` calls, each acquired then reported as `ok` (true/false) with `ms`.
function calls(b, n, ok, ms = 1) {
  for (let i = 0; i < n; i++) {
    const slot = acquire(b, `call ${i}`);
    if (ok) b.onSuccess(slot, ms); else b.onError(slot, ms);
  }
}

const base = {
  failureRateThreshold: 50,
  slidingWindowSize: 10,
  minimumNumberOfCalls: 10,
  waitDurationInOpenState: '30s',
  permittedNumberOfCallsInHalfOpenState: 2,
};

test('opens at the failure-rate threshold, not below', T, () => {
  const below = breaker(base).b;
  calls(below, 6, true);
  calls(below, 4, false);  // 40 % < 50 %
  assert.equal(below.state, 'CLOSED');
  assert.equal(below.metrics().failureRate, 40);

  const at = breaker(base).b;
  calls(at, 5, true);
  calls(at, 5, false);  // 50 %: at the threshold opens
  assert.equal(at.state, 'OPEN');
  assert.equal(at.metrics().failureRate, 50);
});

test('minimumNumberOfCalls: no rate before it', T, () => {
  const { b } = breaker(base);
  calls(b, 9, false);
  assert.equal(b.state, 'CLOSED');
  assert.equal(b.metrics().failureRate, -1);
  calls(b, 1, false);
  assert.equal(b.state, 'OPEN');
});

test('a rejection carries retryAt = open time + waitDurationInOpenState', T, () => {
  const { b, clock } = breaker(base);
  calls(b, 10, false);
  const openedAt = clock.nowMs();
  assert.equal(b.tryAcquire(), -(openedAt + 30000), 'refused: -retryAt');
  clock.advance(10000);
  assert.equal(b.tryAcquire(), -(openedAt + 30000), 'retryAt does not move while OPEN');
  assert.equal(b.metrics().notPermittedCalls, 2);
});

test('OPEN waits waitDurationInOpenState, then HALF_OPEN admits only the permitted probes', T, () => {
  const { b, clock } = breaker(base);
  calls(b, 10, false);
  clock.advance(30000);
  assert.ok(b.tryAcquire() < 0, 'still OPEN at the end of the wait (it must be over: after)');
  clock.advance(1);
  const p1 = acquire(b, 'probe 1');
  assert.equal(b.state, 'HALF_OPEN');
  const p2 = acquire(b, 'probe 2');
  assert.notEqual(p1, p2);
  assert.equal(b.tryAcquire(), -Infinity, 'a third probe is refused: permitted is 2');
  assert.equal(b.pendingPermits, 2);
  assert.equal(b.onSuccess(p2, 1), 'HALF_OPEN', 'an outcome returns the state after it');
  assert.equal(b.onSuccess(p1, 1), 'CLOSED');
  assert.equal(b.state, 'CLOSED');
});

test('a failed half-open verdict reopens for another full wait', T, () => {
  const { b, clock } = breaker(base);
  calls(b, 10, false);
  clock.advance(30001);
  assert.equal(b.onError(acquire(b), 1), 'HALF_OPEN');
  assert.equal(b.onError(acquire(b), 1), 'OPEN');
  assert.equal(b.state, 'OPEN');
  assert.equal(b.tryAcquire(), -(clock.nowMs() + 30000));
});

test('configuration changes behaviour: window size, threshold, wait, slow calls', T, () => {
  // A window of 4 opens after 4 failures where the default of 100 would not.
  const small = breaker({ slidingWindowSize: 4, minimumNumberOfCalls: 4 }).b;
  calls(small, 4, false);
  assert.equal(small.state, 'OPEN');
  const dflt = breaker({}).b;
  calls(dflt, 4, false);
  assert.equal(dflt.state, 'CLOSED');

  // failureRateThreshold 80: 7 failures in 10 stay closed.
  const lenient = breaker({ ...base, failureRateThreshold: 80 }).b;
  calls(lenient, 3, true);
  calls(lenient, 7, false);
  assert.equal(lenient.state, 'CLOSED');

  // waitDurationInOpenState as a number is milliseconds.
  const { b, clock } = breaker({ ...base, waitDurationInOpenState: 1500 });
  calls(b, 10, false);
  assert.equal(b.tryAcquire(), -(clock.nowMs() + 1500));

  // Slow calls: 10 successes over 2 s open a breaker whose threshold is 1 s.
  const slow = breaker({ ...base, slowCallDurationThreshold: '1s', slowCallRateThreshold: 50 }).b;
  calls(slow, 10, true, 2000);
  assert.equal(slow.state, 'OPEN');
  assert.equal(slow.metrics().slowCallRate, 100);
  const notSlow = breaker({ ...base, slowCallDurationThreshold: '3s', slowCallRateThreshold: 50 }).b;
  calls(notSlow, 10, true, 2000);
  assert.equal(notSlow.state, 'CLOSED');
});

test('automaticTransitionFromOpenToHalfOpenEnabled moves to HALF_OPEN on the clock', T, () => {
  const { b, clock } = breaker({ ...base, automaticTransitionFromOpenToHalfOpenEnabled: true });
  calls(b, 10, false);
  clock.advance(30000);
  assert.equal(b.state, 'HALF_OPEN', 'without a call');
  const { b: lazy, clock: c2 } = breaker(base);
  calls(lazy, 10, false);
  c2.advance(30000);
  assert.equal(lazy.state, 'OPEN', 'lazily, on the next call only');
});

test('operator transitions', T, () => {
  const { b } = breaker(base);
  b.transitionToOpen();
  assert.equal(b.state, 'OPEN');
  b.transitionToClosed();
  assert.equal(b.state, 'CLOSED');
  b.transitionToDisabled();
  assert.equal(b.state, 'DISABLED');
  calls(b, 20, false);
  assert.equal(b.state, 'DISABLED');
  b.transitionToForcedOpen();
  assert.equal(b.state, 'FORCED_OPEN');
  assert.equal(b.tryAcquire(), -Infinity);
  b.reset();
  assert.equal(b.state, 'CLOSED');
});

test('outcomes need a pending slot; release(); slots are reused', T, () => {
  const { b } = breaker(base);
  const noPermit = (method) => (e) => e instanceof Error && e.code === 'ENOPERMIT' &&
    e.message.includes(`CoreBreaker.${method}(slot)`);
  assert.throws(() => b.onSuccess(0, 1), noPermit('onSuccess'), 'nothing acquired yet');
  const s = acquire(b);
  const hostile = { toString() { throw new Error('ran user code'); } };
  for (const bad of [s + 1, -1, 0.5, '0', undefined, NaN, Infinity, Symbol('s'), hostile, 2 ** 32]) {
    assert.throws(() => b.onError(bad, 1), noPermit('onError'), typeof bad);
  }
  assert.equal(b.pendingPermits, 1, 'a bad slot consumes nothing');
  b.release(s);
  assert.equal(b.pendingPermits, 0);
  assert.equal(b.metrics().bufferedCalls, 0, 'a released permit records nothing');
  assert.throws(() => b.release(s), noPermit('release'), 'a slot is consumed once');
  assert.throws(() => b.onSuccess(s, 1), noPermit('onSuccess'));
  assert.equal(acquire(b), s, 'a freed slot is reused');
  b.onSuccess(s, 1);
  // Many permits in flight, then their outcomes in reverse order (the table
  // grows to 100 and stays there).
  const slots = [];
  for (let i = 0; i < 100; i++) slots.push(acquire(b));
  assert.equal(new Set(slots).size, 100);
  for (const slot of slots.reverse()) b.onSuccess(slot, 1);
  assert.equal(b.pendingPermits, 0);
  assert.equal(b.metrics().bufferedCalls, 10);
  for (let i = 0; i < 100; i++) assert.ok(acquire(b) < 100, 'slots come from the free list');
});

test('each outcome is paired with its own permit: a later half-open probe that finishes first decides', T, () => {
  const { b, clock } = breaker({ ...base, permittedNumberOfCallsInHalfOpenState: 1 });
  const old = acquire(b, 'a CLOSED-epoch call');
  calls(b, 10, false);  // opens while `old` is still in flight
  assert.equal(b.state, 'OPEN');
  clock.advance(30001);
  const probe = acquire(b, 'the probe');
  assert.equal(b.state, 'HALF_OPEN');
  assert.equal(b.tryAcquire(), -Infinity, 'one probe only');
  // The probe finishes first. With permits consumed oldest first, its
  // success would be booked against `old` (a stale CLOSED-epoch permit, not
  // counted) and the breaker would stay HALF_OPEN.
  b.onSuccess(probe, 1);
  assert.equal(b.state, 'CLOSED', "the probe's success closes the breaker");
  // The old call's failure, later, is its own (stale) outcome: it neither
  // reopens the breaker nor takes anyone else's permit.
  b.onError(old, 1);
  assert.equal(b.state, 'CLOSED');
  assert.equal(b.pendingPermits, 0);
});

test('without a duration, an outcome is timed natively from tryAcquire() on the clock', T, () => {
  const { b, clock } = breaker({ ...base, slowCallDurationThreshold: '1s', slowCallRateThreshold: 50 });
  const slow = acquire(b);
  const quick = acquire(b);
  clock.advance(1500);
  b.onError(slow);
  assert.equal(b.metrics().slowFailedCalls, 1, '1.5 s since its tryAcquire()');
  b.onSuccess(quick, 10);
  assert.equal(b.metrics().slowCalls, 1, 'an explicit duration wins');
  const late = acquire(b);
  clock.advance(999);
  b.onSuccess(late);
  assert.equal(b.metrics().slowCalls, 1, 'the clock starts at its own tryAcquire()');
});

test('bad options throw, naming the option', T, () => {
  const cases = [
    [{ failureRateThreshold: 150 }, RangeError, /resilience4j\.failureRateThreshold .*\(0, 100\], got 150/],
    [{ failureRateThreshold: 0 }, RangeError, /resilience4j\.failureRateThreshold/],
    [{ slidingWindowSize: 0 }, RangeError, /resilience4j\.slidingWindowSize/],
    [{ slidingWindowSize: 'ten' }, TypeError, /resilience4j\.slidingWindowSize: expected/],
    [{ waitDurationInOpenState: '5 seconds' }, TypeError, /resilience4j\.waitDurationInOpenState: expected a duration/],
    [{ waitDurationInOpenState: -5 }, TypeError, /resilience4j\.waitDurationInOpenState/],
    [{ slidingWindowType: 'SOMETIMES' }, TypeError, /resilience4j\.slidingWindowType/],
    [{ failureRateTreshold: 50 }, TypeError, /unknown property "failureRateTreshold"/],
    [{ failureRateThreshold: {} }, TypeError, /resilience4j\.failureRateThreshold must be a number/],
    [{ failureRateThreshold: NaN }, RangeError, /resilience4j\.failureRateThreshold must be finite/],
    ['fifty', TypeError, /resilience4j must be an object/],
  ];
  for (const [config, type, re] of cases) {
    assert.throws(() => new CoreBreaker(config), (e) => e instanceof type && re.test(e.message),
                  JSON.stringify(config));
  }
  assert.throws(() => new CoreBreaker({}, { clock: {} }), /options\.clock must be a ManualClock/);
  assert.throws(() => new ManualClock().advance(-1), RangeError);
});

test('TIME_BASED windows and ISO durations', T, () => {
  const { b, clock } = breaker({
    slidingWindowType: 'TIME_BASED', slidingWindowSize: 10, minimumNumberOfCalls: 3,
    waitDurationInOpenState: 'PT5S',
  });
  calls(b, 2, false);
  clock.advance(11000);  // the first two age out of the 10 s window
  calls(b, 2, false);
  assert.equal(b.state, 'CLOSED');
  calls(b, 1, false);
  assert.equal(b.state, 'OPEN');
  assert.equal(b.tryAcquire(), -(clock.nowMs() + 5000));
});

test('a throwing getter or a Proxy in the options is a JS error, never a crash', T, () => {
  assert.throws(() => new CoreBreaker({ get failureRateThreshold() { throw new Error('getter'); } }), /getter/);
  const hostile = new Proxy({}, { ownKeys() { throw new Error('ownKeys'); } });
  assert.throws(() => new CoreBreaker(hostile), /ownKeys/);
  assert.throws(() => new CoreBreaker({ slidingWindowSize: 2e9 }), RangeError);
  assert.throws(() => new CoreBreaker({ slidingWindowSize: 1.5 }), TypeError);
});

test('random interleavings: every slot is consumed exactly once, in any order', T, () => {
  const { b } = breaker({ slidingWindowSize: 1000, minimumNumberOfCalls: 1000 });
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const live = [];
  const done = new Set();
  let successes = 0;
  for (let step = 0; step < 5000; step++) {
    const r = rand(10);
    if (r < 4 || live.length === 0) {
      const s = acquire(b);
      assert.ok(!live.includes(s), `slot ${s} handed out twice`);
      live.push(s);
      done.delete(s);
    } else if (r < 9) {
      const s = live.splice(rand(live.length), 1)[0];
      if (r < 6) { b.onSuccess(s, 1); successes++; } else if (r < 8) b.onError(s, 1); else b.release(s);
      done.add(s);
    } else if (done.size > 0) {
      const s = [...done][rand(done.size)];
      assert.throws(() => b.onSuccess(s, 1), (e) => e.code === 'ENOPERMIT', `slot ${s} consumed twice`);
    }
    assert.equal(b.pendingPermits, live.length);
  }
  assert.ok(Math.max(...live, 0) < 100, 'the table stays as small as the calls in flight');
  assert.ok(successes > 0);
});

test('close() gives the pending permits back; afterwards the breaker says ECLOSED', T, () => {
  const { b } = breaker({ permittedNumberOfCallsInHalfOpenState: 1 });
  b.transitionToOpen();
  b.transitionToHalfOpen();
  const probe = acquire(b, 'the probe');
  assert.equal(b.closed, false);
  b.close();
  assert.equal(b.closed, true);
  assert.equal(b.pendingPermits, 0);
  assert.equal(b.name, 'node');
  for (const call of [() => b.tryAcquire(), () => b.onSuccess(probe), () => b.release(probe),
    () => b.state, () => b.metrics(), () => b.nowMs(), () => b.reset()]) {
    assert.throws(call, { code: 'ECLOSED', message: 'CoreBreaker: closed' });
  }
  b.close();  // idempotent
  assert.equal(b.fleetHealth(), undefined);
});
