'use strict';

// An Opossum 10.0.0-compatible CircuitBreaker in plain JavaScript.
//
// Same constructor, options, methods, events (names, arguments and order) and
// decisions as opossum@10.0.0; see docs/node.md for the mapping and the
// few deliberate differences. What makes it faster:
//  - statistics are counted directly into a ring of buckets rotated lazily
//    from Date.now() (circuit_breaker_status.js), not through event listeners
//    and a setInterval;
//  - an event is emitted only when someone listens to it;
//  - the open fast path builds its rejection without a stack trace.

const EventEmitter = require('events');
const { randomUUID } = require('crypto');
const { Status } = require('./circuit_breaker_status');
const MemoryCache = require('./memory_cache');

const OUR_ERROR = Symbol('our-error');
const CLOSED = 0;
const OPEN = 1;
const HALF_OPEN = 2;
const SHUTDOWN = 3;

const UNSUPPORTED = ['rotateBucketController'];

// ---------------------------------------------------------------------------
// Errors

function buildError (message, code) {
  const error = new Error(message);
  error.code = code;
  error[OUR_ERROR] = true;
  return error;
}

// Rejections in OPEN are the hot path of an open breaker: `new Error` spends
// most of its time capturing a stack nobody reads (the stack of a rejection is
// always the breaker's own). An object inheriting from Error.prototype is still
// `instanceof Error`, and its fixed fields live once on the prototype; only
// `retryAt` differs per rejection.
const OPEN_ERROR_PROTO = Object.create(Error.prototype, {
  name: { value: 'Error', writable: true, configurable: true },
  message: { value: 'Breaker is open', writable: true, configurable: true },
  code: { value: 'EOPENBREAKER', writable: true, configurable: true },
  stack: {
    value: 'Error: Breaker is open\n    (EOPENBREAKER: no stack trace is captured for breaker rejections)',
    writable: true,
    configurable: true
  },
  [OUR_ERROR]: { value: true }
});

// Node's unhandled-rejection tracking costs about 1 µs for a promise that is
// rejected while nobody handles it yet (a WeakMap entry added, then removed
// when the caller's .catch or await attaches). Rejecting one microtask later,
// after the caller attached its handler, skips that cost; a caller that never
// handles the promise still gets Node's unhandled-rejection report.
function rejectLater (error) {
  let reject;
  const promise = new Promise((resolve, rej) => { reject = rej; });
  queueMicrotask(() => reject(error));
  return promise;
}

function openBreakerError (retryAt, now) {
  const error = Object.create(OPEN_ERROR_PROTO);
  error.code = 'EOPENBREAKER'; // own and enumerable, as on Opossum's error (JSON, loggers)
  error.retryAt = retryAt;
  // The time left, as the Registry's refusals carry it: what a Retry-After wants.
  error.retryAfterMs = Math.max(0, retryAt - now);
  return error;
}

// ---------------------------------------------------------------------------
// Options

function describe (value) {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

function optionError (name, expected, value) {
  return new TypeError(`${name} must be ${expected}, got ${describe(value)}`);
}

// Opossum reads numbers with `??` and never checks them; a string threshold
// silently compares as NaN and never opens. We refuse such options instead.
function numberOption (options, name, fallback, { min = 0, integer = false } = {}) {
  const value = options[name] ?? fallback;
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw optionError(name, integer ? 'an integer' : 'a number', value);
  }
  if (integer && !Number.isInteger(value)) throw optionError(name, 'an integer', value);
  if (value < min) throw optionError(name, `>= ${min}`, value);
  return value;
}

function checkUnsupported (options) {
  for (const name of UNSUPPORTED) {
    if (options[name] !== undefined && options[name] !== false) {
      throw new TypeError(`option ${name} is not supported by this CircuitBreaker ` +
        '(see docs/node.md); use opossum for it');
    }
  }
}

// Fills Opossum's defaults into a copy of the caller's options.
function normalizeOptions (input) {
  if (input === null || typeof input !== 'object') throw optionError('options', 'an object', input);
  checkUnsupported(input);
  const o = { ...input };
  if (o.timeout !== false) o.timeout = numberOption(o, 'timeout', 10000);
  o.resetTimeout = numberOption(o, 'resetTimeout', 30000);
  o.errorThresholdPercentage = numberOption(o, 'errorThresholdPercentage', 50);
  o.rollingCountTimeout = numberOption(o, 'rollingCountTimeout', 10000, { min: 1 });
  o.rollingCountBuckets = numberOption(o, 'rollingCountBuckets', 10, { min: 1, integer: true });
  o.rollingPercentilesEnabled = o.rollingPercentilesEnabled !== false;
  o.capacity = numberOption(o, 'capacity', Number.MAX_SAFE_INTEGER, { integer: true });
  o.volumeThreshold = numberOption(o, 'volumeThreshold', 0, { integer: true });
  if (o.errorFilter != null && typeof o.errorFilter !== 'function') {
    throw optionError('errorFilter', 'a function', o.errorFilter);
  }
  o.enableSnapshots = o.enableSnapshots !== false;
  normalizeCacheOptions(o);
  if (o.autoRenewAbortController && !o.abortController) o.abortController = new AbortController();
  if (o.abortController && typeof o.abortController.abort !== 'function') {
    throw new TypeError('AbortController does not contain `abort()` method');
  }
  if (o.maxFailures) {
    console.error('options.maxFailures is deprecated. Please use options.errorThresholdPercentage');
  }
  return o;
}

// The `cache` (results of successful calls) and `coalesce` (calls in flight)
// options, with Opossum's defaults.
function normalizeCacheOptions (o) {
  o.cacheTTL = o.cacheTTL ?? 0;
  o.cacheGetKey = o.cacheGetKey ?? ((...args) => JSON.stringify(args));
  if (typeof o.cacheGetKey !== 'function') throw optionError('cacheGetKey', 'a function', o.cacheGetKey);
  if (o.cache) {
    if (o.cacheTransport === undefined) {
      o.cacheTransport = new MemoryCache(o.cacheSize);
    } else if (typeof o.cacheTransport !== 'object' || o.cacheTransport === null ||
        !o.cacheTransport.get || !o.cacheTransport.set || !o.cacheTransport.flush) {
      throw new TypeError('options.cacheTransport should be an object with `get`, `set` and `flush` methods');
    }
  }
  o.coalesce = !!o.coalesce;
  o.coalesceTTL = o.coalesceTTL ?? o.timeout;
  o.coalesceResetOn = Array.isArray(o.coalesceResetOn)
    ? o.coalesceResetOn.filter(e => ['error', 'success', 'timeout'].includes(e))
    : [];
  if (o.coalesce) o.coalesceCache = new MemoryCache(o.coalesceSize);
}

// Forgets a coalesced call when `event` is one of coalesceResetOn; with no
// event (a semaphore rejection) always.
function resetCoalesce (breaker, key, event) {
  const o = breaker.options;
  if (o.coalesceCache && (!event || o.coalesceResetOn.includes(event))) o.coalesceCache.delete(key);
}

// ---------------------------------------------------------------------------
// The breaker

class CircuitBreaker extends EventEmitter {
  /** True if `error` was produced by a breaker rather than by the action. */
  static isOurError (error) {
    return !!(error && error[OUR_ERROR]);
  }

  /** A Status (rolling window), e.g. to prime a breaker with stats. */
  static newStatus (options) {
    return new Status(options);
  }

  constructor (action, options = {}) {
    // Resilience4j's configuration: the same class, decided by the C++ core
    // (lib/resilience4j_engine.js). Chosen once here, so the Opossum path's
    // methods stay the prototype's and its call sites monomorphic.
    if (new.target === CircuitBreaker && options !== null && typeof options === 'object' &&
        options.resilience4j !== undefined) {
      const { Resilience4jCircuitBreaker } = require('./resilience4j_engine');
      return new Resilience4jCircuitBreaker(action, options);
    }
    if (options !== null && typeof options === 'object' && options.redis !== undefined &&
        options.resilience4j === undefined) {
      // Opossum's rolling window decides in this process alone: nothing to share.
      throw new TypeError('options.redis needs options.resilience4j: only the core\'s ' +
        'decisions can be shared through Redis (add resilience4j: {...} to share this breaker)');
    }
    super();
    if (!action) {
      throw new TypeError('No action provided. Cannot construct a CircuitBreaker without an invocable action.');
    }
    const o = this.options = normalizeOptions(options);
    this.action = typeof action === 'function' ? action : () => Promise.resolve(action);
    this.semaphore = { count: o.capacity };
    this._state = CLOSED;
    this._pendingClose = false;
    this._enabled = o.enabled !== false;
    this._warmingUp = o.allowWarmUp === true;
    this._volumeThreshold = o.volumeThreshold;
    this._timeout = o.timeout || 0; // 0 = no timeout (Opossum tests truthiness)
    this._errorFilter = o.errorFilter || null;
    this._fallback = null;
    this._name = o.name || action.name || randomUUID();
    this._group = o.group || this._name;
    this._resetTimer = null;
    this._warmUpTimer = null;
    this._healthTimer = null;
    this._timerAnchor = this._anchorTimeoutList();
    this._lastTimerAt = undefined;
    this._status = this._makeStatus(o);
    if (o.state && o.state.warmUp) this._warmingUp = true;
    if (this._warmingUp) {
      this._warmUpTimer = setTimeout(() => { this._warmingUp = false; }, o.rollingCountTimeout);
      this._warmUpTimer.unref();
    }
    this._restore(o.state); // last: a restored shutdown clears the timers above
  }

  // Node keeps one list of timers per duration and tears it down (and
  // reprograms the libuv timer, a call into C++) whenever its last timer is
  // cleared: a breaker fired one call at a time would pay that on every call
  // (~0.6 us). An idle unref'd interval of the same duration keeps the list.
  _anchorTimeoutList () {
    if (!this._timeout) return null;
    const anchor = setInterval(() => {}, this._timeout);
    anchor.unref();
    return anchor;
  }

  _makeStatus (o) {
    if (o.status instanceof Status) return o.status;
    return new Status({ ...o, stats: o.status });
  }

  // Opossum's `state` option: the `toJSON().state` of an earlier breaker.
  _restore (state) {
    if (!state) return;
    this._enabled = state.enabled !== false;
    const closed = state.closed !== false;
    const halfOpen = state.halfOpen || false;
    if (state.shutdown) {
      this.shutdown();
    } else if (!closed && !halfOpen) {
      // Open for longer than resetTimeout already: straight to half-open.
      if (state.lastTimerAt !== undefined && Date.now() - state.lastTimerAt > this.options.resetTimeout) {
        this._lastTimerAt = state.lastTimerAt;
        this._toHalfOpen();
      } else {
        this.open();
        if (state.lastTimerAt !== undefined) this._rearmFrom(state.lastTimerAt);
      }
    } else if (halfOpen && !closed) {
      this._state = HALF_OPEN;
      this._pendingClose = true;
    }
  }

  // A restored open breaker keeps its original reopen instant.
  _rearmFrom (openedAt) {
    clearTimeout(this._resetTimer);
    this._lastTimerAt = openedAt;
    const delay = Math.max(0, openedAt + this.options.resetTimeout - Date.now());
    this._resetTimer = setTimeout(() => this._toHalfOpen(), delay);
    this._resetTimer.unref();
  }

  // --- getters -------------------------------------------------------------

  get name () { return this._name; }
  get group () { return this._group; }
  get pendingClose () { return this._pendingClose; }
  get closed () { return this._state === CLOSED; }
  get opened () { return this._state === OPEN; }
  get halfOpen () { return this._state === HALF_OPEN; }
  get isShutdown () { return this._state === SHUTDOWN; }
  get enabled () { return this._enabled; }
  get warmUp () { return this._warmingUp; }
  get volumeThreshold () { return this._volumeThreshold; }
  get status () { return this._status; }
  get stats () { return this._status.stats; }

  toJSON () {
    return {
      state: {
        name: this.name,
        enabled: this.enabled,
        closed: this.closed,
        open: this.opened,
        halfOpen: this.halfOpen,
        warmUp: this.warmUp,
        shutdown: this.isShutdown,
        lastTimerAt: this._lastTimerAt
      },
      status: this.stats
    };
  }

  // Cheaper than emit() when nobody listens: EventEmitter keeps its listeners
  // in the null-prototype object `_events`.
  _listened (name) {
    return this._events[name] !== undefined;
  }

  // --- state changes -------------------------------------------------------

  open () {
    if (this._state === OPEN || this._state === SHUTDOWN) return;
    this._state = OPEN;
    this._pendingClose = false;
    this._status.open();
    this._lastTimerAt = Date.now();
    this._resetTimer = setTimeout(() => this._toHalfOpen(), this.options.resetTimeout);
    this._resetTimer.unref();
    if (this._listened('open')) this.emit('open');
  }

  close () {
    if (this._state === CLOSED || this._state === SHUTDOWN) return;
    clearTimeout(this._resetTimer);
    this._resetTimer = null;
    this._state = CLOSED;
    this._pendingClose = false;
    this._renewAbortController();
    this._status.close();
    if (this._listened('close')) this.emit('close');
  }

  _toHalfOpen () {
    this._resetTimer = null;
    this._state = HALF_OPEN;
    this._pendingClose = true; // exactly one trial call is admitted
    this._renewAbortController();
    if (this._listened('halfOpen')) this.emit('halfOpen', this.options.resetTimeout);
  }

  _renewAbortController () {
    const o = this.options;
    if (o.autoRenewAbortController && o.abortController && o.abortController.signal.aborted) {
      o.abortController = new AbortController();
    }
  }

  enable () { this._enabled = true; }

  disable () { this._enabled = false; }

  shutdown () {
    this.emit('shutdown');
    this.disable();
    this.removeAllListeners();
    clearTimeout(this._resetTimer);
    clearTimeout(this._warmUpTimer);
    clearInterval(this._healthTimer);
    clearInterval(this._timerAnchor);
    this._status.shutdown();
    this._state = SHUTDOWN;
    this.clearCache();
  }

  clearCache () {
    if (this.options.cache) this.options.cacheTransport.flush();
    if (this.options.coalesceCache) this.options.coalesceCache.flush();
  }

  fallback (func) {
    this._fallback = func instanceof CircuitBreaker ? (...args) => func.fire(...args) : func;
    return this;
  }

  getSignal () {
    const c = this.options.abortController;
    return c && c.signal ? c.signal : undefined;
  }

  getAbortController () { return this.options.abortController; }

  healthCheck (func, interval) {
    interval = interval || 5000;
    if (typeof func !== 'function') throw new TypeError('Health check function must be a function');
    if (isNaN(interval)) throw new TypeError('Health check interval must be a number');
    const check = () => {
      func.apply(this).catch(e => {
        this.emit('healthCheckFailed', e);
        this.open();
      });
    };
    clearInterval(this._healthTimer);
    this._healthTimer = setInterval(check, interval);
    this._healthTimer.unref();
    check();
  }

  // --- firing --------------------------------------------------------------

  fire (...args) {
    return this._run(this.action, args);
  }

  call (context, ...args) {
    return this._run(context, args);
  }

  _run (context, args) {
    if (this._state === SHUTDOWN) {
      return Promise.reject(buildError('The circuit has been shutdown.', 'ESHUTDOWN'));
    }
    const start = Date.now();
    this._status.bucketAt(start).fires++; // rejects count as fires, as in Opossum
    if (this._listened('fire')) this.emit('fire', args);
    if (!this._enabled) return runUnprotected(this, context, args);
    const o = this.options;
    if (o.cache || o.coalesce) return this._runCached(context, args, start);
    const permit = this._admit();
    if (typeof permit !== 'number') return this._admitLater(permit, context, args, start, '');
    if (permit < 0) return this._reject(start, args, permit);
    if (this.semaphore.count < 1) return this._semaphoreLocked(start, args, '', permit);
    this.semaphore.count--;
    return execute(this, context, args, start, '', permit);
  }

  // The state's admission: a permit >= 0 (here always 0: Opossum's state
  // needs none back) or a negative number to reject. The Resilience4j engine
  // overrides it with its core's permit slot, handed back to _succeed/_fail.
  _admit () {
    if (this._state !== CLOSED && !this._pendingClose) return -1;
    this._pendingClose = false;
    return 0;
  }

  // An admission that asks a store off the event loop (the Resilience4j
  // engine with options.redis) gives _admit() a promise of the permit; the
  // call goes on as in _run once it settles.
  _admitLater (pending, context, args, start, key) {
    const shutdown = () => Promise.reject(buildError('The circuit has been shutdown.', 'ESHUTDOWN'));
    return pending.then(permit => {
      if (this._state === SHUTDOWN) return shutdown();
      if (permit < 0) return this._reject(Date.now(), args, permit);
      if (this.semaphore.count < 1) return this._semaphoreLocked(start, args, key, permit);
      this.semaphore.count--;
      return execute(this, context, args, start, key, permit);
    }, error => (this._state === SHUTDOWN ? shutdown() : Promise.reject(error)));
  }

  // _run with the cache and coalescing options, in Opossum's order: the cache,
  // then a coalesced call in flight, then the state.
  _runCached (context, args, start) {
    const o = this.options;
    const key = o.cacheGetKey.apply(this, args);
    if (o.cache) {
      const cached = o.cacheTransport.get(key);
      if (cached) return this._cacheHit('cacheHits', 'cacheHit', cached);
      this._count('cacheMisses', 'cacheMiss');
    }
    if (o.coalesce) {
      const inFlight = o.coalesceCache.get(key);
      if (inFlight) return this._cacheHit('coalesceCacheHits', 'coalesceCacheHit', inFlight);
      this._count('coalesceCacheMisses', 'coalesceCacheMiss');
    }
    const permit = this._admit();
    let call;
    if (typeof permit !== 'number') {
      call = this._admitLater(permit, context, args, start, key);
    } else if (permit < 0) {
      return this._reject(start, args, permit);
    } else if (this.semaphore.count < 1) {
      call = this._semaphoreLocked(start, args, key, permit);
    } else {
      this.semaphore.count--;
      call = execute(this, context, args, start, key, permit);
    }
    if (o.coalesce) {
      o.coalesceCache.set(key, call, o.coalesceTTL > 0 ? Date.now() + o.coalesceTTL : 0);
    }
    return call;
  }

  _cacheHit (counter, event, value) {
    this._count(counter, event);
    return value;
  }

  _count (counter, event) {
    this._status.bucketAt(Date.now())[counter]++;
    if (this._listened(event)) this.emit(event);
  }

  _reject (now, args, permit) {
    this._status.bucketAt(now).rejects++;
    const error = openBreakerError(this._retryAt(now, permit), now);
    if (this._listened('reject')) this.emit('reject', error);
    return this._runFallback(args, error) || rejectLater(error);
  }

  // Epoch ms of the next half-open: the last open + resetTimeout.
  _retryAt (now) {
    return (this._lastTimerAt ?? now) + this.options.resetTimeout;
  }

  _semaphoreLocked (start, args, key, permit) {
    const now = Date.now();
    const error = buildError('Semaphore locked', 'ESEMLOCKED');
    this._status.bucketAt(now).semaphoreRejections++;
    if (this._listened('semaphoreLocked')) this.emit('semaphoreLocked', error, now - start);
    let settled;
    settleError(this, error, args, now - start, now,
      v => { settled = Promise.resolve(v); },
      e => { settled = rejectLater(e); }, permit);
    resetCoalesce(this, key);
    return settled;
  }

  // Opossum calls the fallback with (...args, error) and `this` = the fallback.
  _runFallback (args, error) {
    const fb = this._fallback;
    if (!fb) return undefined;
    try {
      const result = fb.apply(fb, [...args, error]);
      if (this._state !== SHUTDOWN) this._status.bucketAt(Date.now()).fallbacks++;
      if (this._listened('fallback')) this.emit('fallback', result, error);
      return result instanceof Promise ? result : Promise.resolve(result);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // A success (or an error the errorFilter accepts): closes a half-open breaker.
  // (`permit`, and `filtered` for the errorFilter's successes, are the
  // Resilience4j engine's.)
  _succeed (result, latency, now) {
    if (this._state === SHUTDOWN) return; // Opossum's listeners are gone by then
    this._status.countTimed(now, 'successes', latency);
    if (this._state === HALF_OPEN) this.close();
    if (this._listened('success')) this.emit('success', result, latency);
  }

  _fail (error, latency, args, now) {
    if (this._state === SHUTDOWN) return;
    this._status.countTimed(now, 'failures', latency);
    if (this._listened('failure')) this.emit('failure', error, latency, args);
    if (this._shouldOpen(now)) this.open();
  }

  // Opossum's rule: in half-open any failure re-opens; otherwise open when the
  // window holds at least volumeThreshold fires and failures/fires*100 is
  // strictly above errorThresholdPercentage. Warm-up suppresses both.
  _shouldOpen (now) {
    if (this._warmingUp) return false;
    const halfOpen = this._state === HALF_OPEN;
    const { fires, failures } = this._status.failureRatio(now);
    if (fires < this._volumeThreshold && !halfOpen) return false;
    return failures / fires * 100 > this.options.errorThresholdPercentage || halfOpen;
  }

  _timedOut (error, latency, args, now) {
    if (this._state === SHUTDOWN) return;
    this._status.countTimed(now, 'timeouts', latency);
    if (this._listened('timeout')) this.emit('timeout', error, latency, args);
  }
}

// Disabled: the action runs with no protection, but its fire is still counted.
function runUnprotected (breaker, context, args) {
  try {
    const result = breaker.action.apply(context, args);
    return isThenable(result) ? result : Promise.resolve(result);
  } catch (e) {
    return Promise.reject(e);
  }
}

function isThenable (value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') &&
    typeof value.then === 'function';
}

// The end of a failed call (Opossum's handleError): the errorFilter can turn it
// into a success (still rejected, no fallback); otherwise a failure, then the
// fallback's promise or the error.
function settleError (breaker, error, args, latency, now, resolve, reject, permit) {
  const filter = breaker._errorFilter;
  if (filter !== null && filter(error, ...args)) {
    breaker._succeed(error, latency, now, permit, true);
    return reject(error);
  }
  breaker._fail(error, latency, args, now, permit);
  const fb = breaker._runFallback(args, error);
  if (fb) return resolve(fb);
  return reject(error);
}

// One admitted call: the action, its timeout and the semaphore slot it holds;
// `permit` (from _admit) goes back to the breaker with the outcome.
function execute (breaker, context, args, start, key, permit) {
  let resolve, reject;
  const outer = new Promise((res, rej) => { resolve = res; reject = rej; });
  let done = false; // set by the timeout or the outcome, whichever comes first
  let timer = null;
  if (breaker._timeout) {
    timer = setTimeout(() => {
      done = true;
      const now = Date.now();
      const ms = breaker._timeout;
      const error = buildError(`Timed out after ${ms}ms`, 'ETIMEDOUT');
      breaker.semaphore.count++;
      breaker._timedOut(error, now - start, args, now);
      settleError(breaker, error, args, now - start, now, resolve, reject, permit);
      resetCoalesce(breaker, key, 'timeout');
      const controller = breaker.options.abortController;
      if (controller) controller.abort();
    }, breaker._timeout);
  }
  const onSuccess = result => {
    if (done) return;
    done = true;
    if (timer !== null) clearTimeout(timer);
    const now = Date.now();
    breaker._succeed(result, now - start, now, permit);
    resetCoalesce(breaker, key, 'success');
    breaker.semaphore.count++;
    resolve(result);
    const o = breaker.options;
    if (o.cache) o.cacheTransport.set(key, promise, o.cacheTTL > 0 ? Date.now() + o.cacheTTL : 0);
  };
  const onFailure = error => {
    if (done) return;
    done = true;
    if (timer !== null) clearTimeout(timer);
    breaker.semaphore.count++;
    const now = Date.now();
    settleError(breaker, error, args, now - start, now, resolve, reject, permit);
    resetCoalesce(breaker, key, 'error');
  };
  let result;
  let promise;
  try {
    result = breaker.action.apply(context, args);
  } catch (error) {
    onFailure(error);
    return outer;
  }
  // Opossum chains .then(ok).catch(err): a rejection is seen one microtask
  // after a resolution would be. We keep that order (it decides which of two
  // calls settling together is counted first) by deferring the failure once.
  promise = isThenable(result) ? result : Promise.resolve(result);
  promise.then(onSuccess, error => queueMicrotask(() => onFailure(error)));
  return outer;
}

// require() gives the class itself, as opossum's does; the named and default
// exports serve destructuring and ES-module/TypeScript default imports.
module.exports = CircuitBreaker;
module.exports.CircuitBreaker = CircuitBreaker;
module.exports.Status = Status;
module.exports.default = CircuitBreaker;
