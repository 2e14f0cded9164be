'use strict';

// Runs one scripted scenario against a CircuitBreaker implementation under
// node:test's fake timers and returns everything observable: the events with
// their meaningful arguments, in order, and after every step the state getters,
// the stats and how each fired promise settled. The differential tests run the
// same script against this package's class and against opossum@10.0.0 and
// require the two traces to be deep-equal.

const { mock } = require('node:test');

const EVENTS = ['fire', 'success', 'failure', 'timeout', 'reject', 'open', 'halfOpen',
  'close', 'fallback', 'semaphoreLocked', 'shutdown', 'cacheHit', 'cacheMiss', 'coalesceCacheHit',
  'coalesceCacheMiss'];

// What of an event argument is comparable across the two implementations.
function summarize (value) {
  if (value instanceof Error) return `error:${value.code || value.message}`;
  if (value instanceof Promise) return 'promise';
  if (Array.isArray(value)) return value.map(summarize);
  return value;
}

// The action: its first argument says what the call does.
//   ['ok', v] resolves v; ['fail', code] rejects; ['slow', ms, v] resolves
//   after ms; ['slowfail', ms, code] rejects after ms; ['throw', code] throws
//   synchronously; ['sync', v] returns v without a promise.
function makeAction () {
  return function action (kind, a, b) {
    switch (kind) {
      case 'ok': return Promise.resolve(a);
      case 'fail': return Promise.reject(codeError(a));
      case 'slow': return new Promise(resolve => setTimeout(() => resolve(b), a));
      case 'slowfail': return new Promise((resolve, reject) => setTimeout(() => reject(codeError(b)), a));
      case 'throw': throw codeError(a);
      case 'sync': return a;
      default: throw new Error(`unknown action kind ${kind}`);
    }
  };
}

function codeError (code) {
  const e = new Error(`action failed: ${code}`);
  e.code = code;
  return e;
}

// Fallback kinds: value, throw, reject, or another breaker of the same class.
function makeFallback (Impl, kind) {
  switch (kind) {
    case 'value': return (...args) => `fallback(${args.length})`;
    case 'throw': return () => { throw codeError('EFALLBACK'); };
    case 'reject': return () => Promise.reject(codeError('EFALLBACKREJ'));
    case 'breaker': return new Impl(function fb (...args) {
      return Promise.resolve(`breaker-fallback:${summarize(args[args.length - 1])}`);
    }, { timeout: false });
    default: return null;
  }
}

function flush () {
  return new Promise(resolve => setImmediate(resolve));
}

function observe (breaker) {
  const s = breaker.stats;
  return {
    opened: breaker.opened,
    closed: breaker.closed,
    halfOpen: breaker.halfOpen,
    pendingClose: breaker.pendingClose,
    enabled: breaker.enabled,
    warmUp: breaker.warmUp,
    isShutdown: breaker.isShutdown,
    stats: s
  };
}

/**
 * @param {Function} Impl the CircuitBreaker class under test
 * @param {object} scenario { options, fallback, steps, action }
 *   steps: { fire: [...] } | { call: [...] } | { tick: ms } | { method: 'open' | ... }
 *   | { snapshot: true } (stats window) | { json: true }
 */
async function run (Impl, scenario) {
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 1_000_000 });
  const trace = [];
  const outcomes = [];
  let breaker;
  try {
    const options = typeof scenario.options === 'function' ? scenario.options() : { ...scenario.options };
    breaker = new Impl(scenario.action || makeAction(), options);
    if (scenario.fallback) breaker.fallback(makeFallback(Impl, scenario.fallback));
    for (const name of EVENTS) {
      breaker.on(name, (...args) => trace.push([name, ...args.map(summarize)]));
    }
    trace.push(['initial', observe(breaker)]);
    for (const step of scenario.steps) {
      await applyStep(breaker, step, outcomes, trace);
      await flush();
      trace.push(['after', step, observe(breaker), outcomes.slice()]);
    }
  } finally {
    if (breaker && !breaker.isShutdown) breaker.shutdown();
    mock.timers.reset();
  }
  return trace;
}

async function applyStep (breaker, step, outcomes, trace) {
  if (step.fire || step.call) {
    const i = outcomes.length;
    outcomes.push('pending');
    let p;
    try {
      p = step.fire ? breaker.fire(...step.fire) : breaker.call({ ctx: 1 }, ...step.call);
    } catch (e) {
      // Opossum lets a synchronous throw of a disabled breaker's action escape
      // fire(); ours rejects. The outcome is the same error either way.
      outcomes[i] = `rejected:${summarize(e)}`;
      return;
    }
    p.then(v => { outcomes[i] = `resolved:${summarize(v)}`; },
      e => { outcomes[i] = `rejected:${summarize(e)}`; });
  } else if (step.tick !== undefined) {
    // MockTimers.tick(n) moves Date to the end of the n ms before it runs the
    // timers due, so a timer callback would read a clock later than it runs
    // at, which no real clock does. One millisecond at a time, every callback
    // reads its own instant.
    for (let ms = 0; ms < step.tick; ms++) mock.timers.tick(1);
  } else if (step.method) {
    breaker[step.method]();
  } else if (step.json) {
    const { state, status } = breaker.toJSON();
    delete state.lastTimerAt; // Opossum's is its construction time; see docs
    trace.push(['json', state, status]);
  } else {
    throw new Error(`unknown step ${JSON.stringify(step)}`);
  }
}

// A small seeded PRNG (mulberry32) so a failing random scenario can be replayed.
function prng (seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick (rand, list) {
  return list[Math.floor(rand() * list.length)];
}

// A random scenario: random options and a random mix of fires and ticks.
function randomScenario (seed) {
  const rand = prng(seed);
  const options = {
    errorThresholdPercentage: pick(rand, [0, 25, 50, 200 / 3, 100]),
    volumeThreshold: pick(rand, [0, 0, 1, 3, 5]),
    rollingCountBuckets: pick(rand, [1, 2, 3, 10]),
    rollingCountTimeout: pick(rand, [100, 1000, 3000, 10000]),
    resetTimeout: pick(rand, [50, 500, 2000]),
    timeout: pick(rand, [false, 100, 1000]),
    enableSnapshots: false
  };
  if (rand() < 0.25) options.capacity = pick(rand, [1, 2, 3]);
  if (rand() < 0.2) options.allowWarmUp = true;
  if (rand() < 0.25) options.errorFilter = err => err.code === 'EFILTERED';
  if (rand() < 0.2) options.rollingPercentilesEnabled = false;
  if (rand() < 0.15) Object.assign(options, { cache: true, cacheTTL: pick(rand, [0, 200]) });
  if (rand() < 0.15) {
    Object.assign(options, { coalesce: true, coalesceResetOn: pick(rand, [[], ['error', 'timeout'], ['success']]) });
  }
  const fallback = rand() < 0.3 ? pick(rand, ['value', 'throw', 'reject']) : null;
  const steps = [];
  const n = 10 + Math.floor(rand() * 40);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.25) steps.push({ fire: ['ok', i] });
    else if (r < 0.45) steps.push({ fire: ['fail', pick(rand, ['E1', 'EFILTERED'])] });
    else if (r < 0.55) steps.push({ fire: ['slow', pick(rand, [10, 150, 1500]), i] });
    else if (r < 0.62) steps.push({ fire: ['slowfail', pick(rand, [10, 150, 1500]), 'E2'] });
    else if (r < 0.65) steps.push({ fire: ['throw', 'E3'] });
    else if (r < 0.68) steps.push({ fire: ['sync', i] });
    else if (r < 0.70) steps.push({ method: pick(rand, ['open', 'close', 'disable', 'enable']) });
    else steps.push({ tick: pick(rand, [0, 1, 10, 99, 100, 101, 333, 1000, 2500]) });
  }
  return { options, fallback, steps };
}

module.exports = { run, randomScenario, makeAction, codeError };
