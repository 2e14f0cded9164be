'use strict';
// fusebox for Node.js: the native addon (build/fusebox_node.node, built by
// `npm install`) and the JS glue that awaits actions (docs/node.md).

const native = require('./native');

const { CoreBreaker, ManualClock, NativeRegistry, classifyMeta, fleetStores, providerCircuitKey } = native;

// A registry's refusal: code 'EOPENBREAKER', retryAt (the clock's ms, or
// Infinity when unknown), key. Built without a stack trace: a rejection is a
// normal, frequent outcome, and capturing a stack is most of an Error's cost
// (bench/core.bench.js).
// retryAfterMs is the time left until then (Infinity when unknown): what an
// HTTP Retry-After or a caller's backoff wants, whatever the clock.
class OpenBreakerError extends Error {
  constructor(key, retryAt, nowMs) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`circuit "${key}" is open`);
    Error.stackTraceLimit = limit;
    this.code = 'EOPENBREAKER';
    this.key = key;
    this.retryAt = retryAt;
    this.retryAfterMs = Math.max(0, retryAt - nowMs);
  }
}
Object.defineProperty(OpenBreakerError.prototype, 'name', { value: 'OpenBreakerError' });

// runProviderCall's failures: code 'CONN_003' | 'CONN_008' | 'CONN_009' |
// 'CONN_010' (fusebox::meta::ConnCode), httpStatus, metaCode, metaSubcode,
// retryAfterSeconds, retryAt, circuitOpen, and `cause` (the action's error)
// when there was one. The message is fusebox's redacted summary: never the
// body, the message Meta sent, or a token.
class ProviderError extends Error {
  constructor(fields, cause) {
    const limit = Error.stackTraceLimit;
    if (fields.circuitOpen) Error.stackTraceLimit = 0;
    super(fields.message, cause === undefined ? undefined : { cause });
    Error.stackTraceLimit = limit;
    this.code = fields.code;
    this.httpStatus = fields.httpStatus;
    this.metaCode = fields.metaCode;
    this.metaSubcode = fields.metaSubcode;
    this.retryAfterSeconds = fields.retryAfterSeconds;
    this.retryAt = fields.retryAt;
    this.circuitOpen = fields.circuitOpen;
  }
}
Object.defineProperty(ProviderError.prototype, 'name', { value: 'ProviderError' });

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

// Runs `action` (sync or async) and returns a promise of its value:
// `succeeded()` is called when it returns or resolves, `failed(error)` (which
// must throw) when it throws or rejects, and what `failed` throws rejects.
function settle(action, succeeded, failed) {
  let result;
  let thenable;
  try {
    result = action();
    thenable = isThenable(result);  // may run a hostile `then` getter
  } catch (e) {
    try {
      failed(e);
    } catch (thrown) {
      return Promise.reject(thrown);
    }
  }
  if (!thenable) {
    succeeded();
    return Promise.resolve(result);
  }
  return Promise.resolve(result).then((v) => { succeeded(); return v; }, failed);
}

// Breakers by key (fusebox::Registry): bounded by maxBreakers (LRU) and
// idleTtlMs, every breaker created from `defaults` (Resilience4j names).
class Registry {
  constructor(options = {}) {
    this._native = new NativeRegistry(options);
  }

  // Runs `action` (sync or async) under the breaker of `key`: a promise of its
  // result, or a rejection with an OpenBreakerError when the breaker refuses
  // (the action is not called). The outcome is recorded with its duration on
  // the registry's clock; a throw or rejection is a failure, except that
  // options.errorFilter(err) === true leaves it uncounted (Opossum's meaning)
  // and options.openForMs(err) > 0 opens the breaker for that long at once
  // (a Retry-After, a quota's recovery time). Either way the error rejects.
  run(key, action, options) {
    if (typeof action !== 'function') {
      return Promise.reject(new TypeError('Registry.run(key, action): action must be a function'));
    }
    if (options !== undefined) return this.#runWith(key, action, options);
    return withSlot(this._native, key, action, undefined, runPlain);
  }

  #runWith(key, action, options) {
    const { errorFilter, openForMs } = options ?? {};
    if (errorFilter !== undefined && typeof errorFilter !== 'function') {
      return Promise.reject(new TypeError('Registry.run: options.errorFilter must be a function (error) => boolean'));
    }
    if (openForMs !== undefined && typeof openForMs !== 'function') {
      return Promise.reject(new TypeError('Registry.run: options.openForMs must be a function (error) => ms'));
    }
    return withSlot(this._native, key, action, { errorFilter, openForMs }, runFiltered);
  }

  // 'CLOSED', 'OPEN', ... of the breaker held for `key`, or undefined.
  state(key) { return this._native.stateOf(key); }
  metrics(key) { return this._native.metricsOf(key); }
  get size() { return this._native.size(); }
  keys() { return this._native.keys(); }
  sweep() { return this._native.sweep(); }
  nowMs() { return this._native.nowMs(); }
  // Stops sharing (options.redis): drops every breaker and stops the store's
  // threads. Calls made afterwards throw; a call in flight still finishes.
  close() { this._native.close(); }
  // options.redis: { connected, commands, errors, ... } (the store's
  // counters); undefined without it.
  fleetHealth() { return this._native.fleetHealth(); }
}

// Calls run(nat, key, slot, action, extra) with the slot acquire() gave for
// key: at once, or, when acquire() answered with a promise (the breaker had
// to ask the fleet's store, options.redis, which a libuv thread did), once
// it has answered. A throw from acquire() rejects.
function withSlot(nat, key, action, extra, run) {
  let slot;
  try {
    slot = nat.acquire(key);
  } catch (e) {
    return Promise.reject(e);
  }
  if (typeof slot === 'number') return run(nat, key, slot, action, extra);
  return slot.then((s) => run(nat, key, s, action, extra));
}

function runPlain(nat, key, slot, action) {
  if (slot < 0) return Promise.reject(new OpenBreakerError(key, -slot, nat.nowMs()));
  return settle(action, () => nat.finish(slot, 0), (e) => { nat.finish(slot, 1); throw e; });
}

function runFiltered(nat, key, slot, action, { errorFilter, openForMs }) {
  if (slot < 0) return Promise.reject(new OpenBreakerError(key, -slot, nat.nowMs()));
  const failed = (e) => {
    let outcome = 1;
    let ms = 0;
    try {
      if (errorFilter !== undefined && errorFilter(e) === true) {
        outcome = 2;
      } else if (openForMs !== undefined) {
        ms = Number(openForMs(e));
        if (ms > 0) outcome = 3;
      }
    } finally {
      // A throwing filter still frees the permit (as a failure).
      nat.finish(slot, outcome, ms);
    }
    throw e;
  };
  return settle(action, () => nat.finish(slot, 0), failed);
}

// The Meta response an action's error carries: `err.response`, or the error
// itself when it has a numeric status ({ status, headers, body }).
function errorResponse(err) {
  if (err === null || typeof err !== 'object') return undefined;
  const r = err.response;
  if (r !== null && typeof r === 'object' && typeof r.status === 'number') return r;
  if (typeof err.status === 'number') return err;
  return undefined;
}

// fusebox::meta::RunProviderCall: `action` under the two circuits of `key`
// ("provider:<provider>:<workload>:<subject>", providerCircuitKey()) in
// `registry`: transient outside, quota inside. Resolves with the action's
// value (a success in both). An action that throws an error carrying a Meta
// response (err.response or err itself = { status, headers, body }) rejects
// with the ProviderError of its classification (CONN_008 opens the quota
// circuit for its recovery time, CONN_003 counts in the transient one,
// CONN_009/CONN_010 count as successes). Any other throw is a transient
// failure and is rethrown unchanged. A circuit that refuses rejects with a
// ProviderError whose circuitOpen is true (CONN_003 or CONN_008), and the
// action is not called.
function runProviderCall(registry, key, action) {
  if (!(registry instanceof Registry)) {
    return Promise.reject(new TypeError('runProviderCall(registry, key, action): registry must be a Registry'));
  }
  if (typeof action !== 'function') {
    return Promise.reject(new TypeError('runProviderCall(registry, key, action): action must be a function'));
  }
  const nat = registry._native;
  let started;
  try {
    started = nat.providerStart(key);
  } catch (e) {
    return Promise.reject(e);
  }
  // A promise when the circuits had to ask the fleet's store (options.redis),
  // which a libuv thread did: as withSlot() for Registry.run.
  if (started instanceof Promise) return started.then((s) => runProvider(nat, s, action));
  return runProvider(nat, started, action);
}

// runProviderCall with what providerStart() decided: a slot, or a refusal.
function runProvider(nat, slot, action) {
  if (typeof slot !== 'number') return Promise.reject(new ProviderError(slot));
  const failed = (e) => {
    const response = errorResponse(e);
    if (response === undefined) {
      nat.providerFinish(slot, 2);
      throw e;
    }
    throw new ProviderError(nat.providerFinish(slot, 1, response), e);
  };
  return settle(action, () => nat.providerFinish(slot, 0), failed);
}

const CircuitBreaker = require('./circuit_breaker.js');
const {
  snapshotKey, SingleFlight, MemorySnapshotStore, StaleIfErrorReader, defaultMayServeStale,
} = require('./stale_reader.js');

module.exports = {
  CircuitBreaker,
  snapshotKey,
  SingleFlight,
  MemorySnapshotStore,
  StaleIfErrorReader,
  defaultMayServeStale,
  CoreBreaker,
  ManualClock,
  Registry,
  OpenBreakerError,
  ProviderError,
  classifyMeta,
  fleetStores,
  providerCircuitKey,
  runProviderCall,
};
