'use strict';

// `new CircuitBreaker(action, { resilience4j: {...} })`: the Opossum API with
// its decisions taken by fusebox's C++ core (a native CoreBreaker configured
// with Resilience4j's names) instead of Opossum's rolling window. See
// docs/node.md, "CircuitBreaker with Resilience4j's configuration".
//
// Only admission, outcomes and state move to the core: fire(), timeouts,
// capacity, errorFilter, fallbacks, cache/coalesce, the Status counters and
// the events are the Opossum path's (lib/circuit_breaker.js), which hands
// this class the core's permit slot from _admit() back with each outcome.
//
// With options.redis the core shares its OPEN state and recovery probe with
// every breaker of the same `name` on that Redis (docs/node.md, "Fleet
// sharing"); an admission that must ask Redis is a promise of the slot,
// which the Opossum path awaits (_admitLater) before running the action.

const CircuitBreaker = require('./circuit_breaker');
const { CoreBreaker } = require('./native');

// Opossum options that configure the decision the core now makes.
const CONFLICTING = [
  'errorThresholdPercentage', 'volumeThreshold', 'resetTimeout', 'allowWarmUp',
  'rollingCountTimeout', 'rollingCountBuckets'
];

// The core's states as Opossum's three (the event a change to them emits).
const FAMILY = {
  CLOSED: 'close',
  DISABLED: 'close',
  METRICS_ONLY: 'close',
  FORCED_CLOSED: 'close',
  OPEN: 'open',
  FORCED_OPEN: 'open',
  HALF_OPEN: 'halfOpen'
};

function checkOptions (options) {
  if (options.redis !== undefined && (typeof options.name !== 'string' || options.name === '')) {
    // The default (the action's name or a random UUID) would merge unrelated
    // circuits, or share none.
    throw new TypeError('options.redis needs options.name: the circuit\'s key in the fleet ' +
      '(e.g. \'graph:read:1\'), the same in every process that shares it');
  }
  const conflicting = CONFLICTING.filter(name => options[name] !== undefined);
  if (conflicting.length > 0) {
    throw new TypeError(`option${conflicting.length > 1 ? 's' : ''} ${conflicting.join(', ')} ` +
      'cannot be combined with options.resilience4j: the core decides from Resilience4j\'s ' +
      'names (failureRateThreshold, minimumNumberOfCalls, slidingWindowSize, ' +
      'waitDurationInOpenState, ...)');
  }
}

class Resilience4jCircuitBreaker extends CircuitBreaker {
  constructor (action, options) {
    checkOptions(options);
    super(action, options);
    try {
      this._core = new CoreBreaker(options.resilience4j,
        { clock: options.clock, name: this._name, redis: options.redis });
    } catch (e) {
      clearInterval(this._timerAnchor);
      throw e;
    }
    this._family = 'close';
    this._openWaitMs = undefined;
    this._fleet = options.redis !== undefined;
    this._coreClosed = false; // shutdown() of a fleet breaker closes its core
    if (!this._enabled) this._core.transitionToDisabled();
    this._restoreCore(this._restored);
    this._restored = undefined;
  }

  /** The native CoreBreaker that decides (its metrics(), nowMs(), state). */
  get core () { return this._core; }

  // --- admission and outcomes (called by the Opossum path) ---------------

  // An admission in CLOSED changes no state; any other may (OPEN ->
  // HALF_OPEN happens here, lazily).
  // With options.redis the core may answer with a promise of the slot.
  _admit () {
    const slot = this._core.tryAcquire();
    if (slot >= 0 && this._family === 'close') return slot;
    if (typeof slot === 'number') {
      this._observe();
      return slot;
    }
    return slot.then(s => {
      if (!this._coreClosed) this._observe();
      return s;
    });
  }

  // Epoch ms, as on the Opossum path: now + the time left on the core clock
  // (-permit is the core's retryAt); Infinity when the core cannot say.
  _retryAt (now, permit) {
    return permit === -Infinity ? Infinity : now + (-permit - this._core.nowMs());
  }

  // The core times the call itself: onSuccess/onError without a duration
  // take the time since tryAcquire() on its clock. errorFilter's "not a
  // failure" is Resilience4j's ignored exception: the permit goes back with
  // no outcome recorded.
  _succeed (result, latency, now, permit, filtered) {
    if (this._coreClosed) return; // close() gave the permit back
    const state = filtered ? this._core.release(permit) : this._core.onSuccess(permit);
    if (this.isShutdown) return;
    this._status.countTimed(now, 'successes', latency);
    this._observe(state);
    if (this._listened('success')) this.emit('success', result, latency);
  }

  _fail (error, latency, args, now, permit) {
    if (this._coreClosed) return;
    const state = this._core.onError(permit);
    if (this.isShutdown) return;
    this._status.countTimed(now, 'failures', latency);
    if (this._listened('failure')) this.emit('failure', error, latency, args);
    this._observe(state);
  }

  // Emits the event of a change of the core's state (`state`, else read now)
  // since last seen.
  _observe (state = this._core.state) {
    const family = FAMILY[state];
    if (family === this._family) return;
    this._family = family;
    if (family === 'open') {
      this._lastTimerAt = Date.now();
      this._status.open();
      const retryAt = this._core.metrics().retryAt;
      this._openWaitMs = retryAt === null ? undefined : retryAt - this._core.nowMs();
      if (this._listened('open')) this.emit('open');
    } else if (family === 'halfOpen') {
      this._renewAbortController();
      if (this._listened('halfOpen')) this.emit('halfOpen', this._openWaitMs);
    } else {
      this._status.close();
      this._renewAbortController();
      if (this._listened('close')) this.emit('close');
    }
  }

  // --- state -----------------------------------------------------------

  get closed () { return !this.isShutdown && FAMILY[this._core.state] === 'close'; }
  get opened () { return !this.isShutdown && FAMILY[this._core.state] === 'open'; }
  get halfOpen () { return !this.isShutdown && this._core.state === 'HALF_OPEN'; }
  get pendingClose () { return this.halfOpen; }

  open () {
    if (this.isShutdown) return;
    this._core.transitionToOpen();
    this._observe();
  }

  close () {
    if (this.isShutdown) return;
    this._core.transitionToClosed();
    this._observe();
  }

  disable () {
    this._enabled = false;
    if (this._coreClosed) return;
    this._core.transitionToDisabled();
    this._observe();
  }

  enable () {
    this._enabled = true;
    if (this._coreClosed) return;
    if (this._core.state === 'DISABLED') this._core.transitionToClosed();
    this._observe();
  }

  // A fleet breaker also closes its core: its permits go back and its
  // store reference is dropped (the last user of a store stops its threads,
  // off the event loop). Without redis the core stays readable.
  shutdown () {
    super.shutdown();
    if (this._fleet && !this._coreClosed) {
      this._coreClosed = true;
      this._core.close();
    }
  }

  /** options.redis: the shared store's { connected, counters }; else undefined. */
  fleetHealth () { return this._core.fleetHealth(); }

  toJSON () {
    const json = super.toJSON();
    json.state.coreState = this._coreClosed ? null : this._core.state;
    return json;
  }

  // Opossum's `state` option (an earlier toJSON().state): the base
  // constructor calls this before the core exists; applied once it does.
  _restore (state) {
    this._restored = state;
  }

  _restoreCore (state) {
    if (!state) return;
    if (state.shutdown) {
      this.shutdown();
      return;
    }
    if (state.enabled === false) {
      this._core.transitionToDisabled();
    } else if (state.closed === false || state.halfOpen) {
      this._core.transitionToOpen(); // a full waitDurationInOpenState from now
      if (state.halfOpen) this._core.transitionToHalfOpen();
    }
    this._family = FAMILY[this._core.state];
  }
}

module.exports = { Resilience4jCircuitBreaker };
