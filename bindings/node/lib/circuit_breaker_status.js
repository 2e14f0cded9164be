'use strict';

// The rolling statistical window of an Opossum-compatible CircuitBreaker.
//
// Opossum 10 keeps `rollingCountBuckets` bucket objects and rotates them with a
// setInterval of floor(rollingCountTimeout / rollingCountBuckets) ms started at
// construction. We keep the same buckets in a ring but rotate lazily: the
// bucket a count lands in is derived from Date.now(), so the boundaries are the
// same instants (construction + k * interval) without a timer per breaker and
// without waking the process.

const EventEmitter = require('events');

const PERCENTILES = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 1];

// The counters of one bucket, in Opossum's order (its `stats` object lists
// them in this order too).
const COUNTERS = [
  'failures', 'fallbacks', 'successes', 'rejects', 'fires', 'timeouts',
  'cacheHits', 'cacheMisses', 'coalesceCacheHits', 'coalesceCacheMisses',
  'semaphoreRejections'
];

// Latency samples are integer milliseconds, nearly always small: a bucket
// counts them in a histogram (no allocation per call, no array growing with
// the call rate) and keeps the rare large, negative (clock stepped back) or
// fractional ones in a plain array. Opossum's latencyTimes, mean and
// percentiles are all functions of the multiset of samples, so they come out
// the same.
const HISTOGRAM_SLOTS = 1024;

function addSample (b, latency) {
  if (Number.isInteger(latency) && latency >= 0 && latency < HISTOGRAM_SLOTS) {
    if (b.histogram === null) b.histogram = new Uint32Array(HISTOGRAM_SLOTS);
    b.histogram[latency]++;
    if (latency > b.histogramMax) b.histogramMax = latency;
  } else {
    b.otherLatencies.push(latency);
  }
}

// Appends a bucket's samples to `out`, histogram values in ascending order.
function appendSamples (b, out) {
  const h = b.histogram;
  if (h !== null) {
    for (let v = 0; v <= b.histogramMax; v++) {
      for (let n = h[v]; n > 0; n--) out.push(v);
    }
  }
  for (const t of b.otherLatencies) out.push(t);
}

// One shape for every bucket so V8 keeps the counter updates monomorphic.
function newBucket () {
  return {
    failures: 0,
    fallbacks: 0,
    successes: 0,
    rejects: 0,
    fires: 0,
    timeouts: 0,
    cacheHits: 0,
    cacheMisses: 0,
    coalesceCacheHits: 0,
    coalesceCacheMisses: 0,
    semaphoreRejections: 0,
    histogram: null, // Uint32Array once a sample arrives
    histogramMax: -1,
    otherLatencies: [],
    // undefined until open()/close() marks the bucket, as in Opossum.
    isCircuitBreakerOpen: undefined
  };
}

function resetBucket (b) {
  for (let i = 0; i < COUNTERS.length; i++) b[COUNTERS[i]] = 0;
  if (b.histogram !== null && b.histogramMax >= 0) b.histogram.fill(0, 0, b.histogramMax + 1);
  b.histogramMax = -1;
  if (b.otherLatencies.length) b.otherLatencies = [];
  b.isCircuitBreakerOpen = undefined;
}

// Opossum's percentile rule (nearest rank, 0 for an empty window).
function calculatePercentile (percentile, arr) {
  if (percentile === 0) return arr[0] || 0;
  const idx = Math.ceil(percentile * arr.length);
  return arr[idx - 1] || 0;
}

class Status extends EventEmitter {
  /**
   * @param {object} options rollingCountBuckets, rollingCountTimeout,
   *   rollingPercentilesEnabled, enableSnapshots, stats (a stats object to
   *   prime the current bucket with, e.g. a previous `toJSON().status`).
   */
  constructor (options = {}) {
    super();
    this._buckets = options.rollingCountBuckets || 10;
    const timeout = options.rollingCountTimeout || 10000;
    // setInterval treats 0 as 1 ms; so do we.
    this._interval = Math.max(1, Math.floor(timeout / this._buckets));
    this.rollingPercentilesEnabled = options.rollingPercentilesEnabled !== false;
    this.enableSnapshots = options.enableSnapshots !== false;
    this._origin = Date.now();
    this._index = 0; // how many intervals have elapsed at the current bucket
    this._head = 0; // ring slot of the current bucket
    this._frozen = false; // shutdown stops the window as Opossum's clearInterval does
    this._ring = new Array(this._buckets);
    for (let i = 0; i < this._buckets; i++) this._ring[i] = newBucket();
    this._snapshotTimer = null;
    if (options.stats) this._prime(options.stats);
    this._watchSnapshotListeners();
  }

  // Copies a saved stats object into the current bucket.
  _prime (stats) {
    const b = this._ring[this._head];
    for (const key of COUNTERS) {
      if (typeof stats[key] === 'number') b[key] = stats[key];
    }
    if (Array.isArray(stats.latencyTimes)) {
      for (const t of stats.latencyTimes) addSample(b, t);
    }
  }

  /**
   * The bucket counts at `now` land in, rotating past buckets out first.
   * @param {number} now Date.now()
   */
  bucketAt (now) {
    if (!this._frozen) {
      const index = Math.floor((now - this._origin) / this._interval);
      // A clock that steps backwards keeps the current bucket.
      if (index > this._index) this._advance(index - this._index, index);
    }
    return this._ring[this._head];
  }

  _advance (steps, index) {
    const n = Math.min(steps, this._buckets);
    for (let i = 0; i < n; i++) {
      this._head = (this._head + 1) % this._buckets;
      resetBucket(this._ring[this._head]);
    }
    this._index = index;
  }

  // Buckets newest first, the order of Opossum's window array.
  _newestFirst (now) {
    this.bucketAt(now);
    const out = new Array(this._buckets);
    for (let i = 0; i < this._buckets; i++) {
      out[i] = this._ring[(this._head - i + this._buckets) % this._buckets];
    }
    return out;
  }

  /** Failures and fires over the window: what the open decision reads. */
  failureRatio (now) {
    this.bucketAt(now);
    let fires = 0;
    let failures = 0;
    for (let i = 0; i < this._buckets; i++) {
      const b = this._ring[i];
      fires += b.fires;
      failures += b.failures;
    }
    return { fires, failures };
  }

  /** Cumulative stats of the window, the same object Opossum returns. */
  get stats () {
    const totals = {};
    for (const key of COUNTERS) totals[key] = 0;
    totals.percentiles = {};
    totals.latencyTimes = [];
    for (const b of this._newestFirst(Date.now())) {
      for (const key of COUNTERS) totals[key] += b[key] || 0;
      if (this.rollingPercentilesEnabled) appendSamples(b, totals.latencyTimes);
    }
    if (this.rollingPercentilesEnabled) {
      const times = totals.latencyTimes.sort((a, b) => a - b);
      totals.latencyMean = times.length
        ? times.reduce((a, b) => a + b, 0) / times.length
        : 0;
      for (const p of PERCENTILES) totals.percentiles[p] = calculatePercentile(p, times);
    } else {
      totals.latencyMean = -1;
      for (const p of PERCENTILES) totals.percentiles[p] = -1;
    }
    return totals;
  }

  /** The buckets as Opossum's `window` array of plain objects, newest first. */
  get window () {
    return this._newestFirst(Date.now()).map(b => {
      const copy = { percentiles: {} };
      for (const key of COUNTERS) copy[key] = b[key];
      copy.latencyTimes = [];
      appendSamples(b, copy.latencyTimes);
      if (b.isCircuitBreakerOpen !== undefined) copy.isCircuitBreakerOpen = b.isCircuitBreakerOpen;
      return copy;
    });
  }

  /** Opossum's public increment(property, latency). */
  increment (property, latencyRunTime) {
    const b = this.bucketAt(Date.now());
    b[property] = (b[property] || 0) + 1;
    if (this.rollingPercentilesEnabled &&
        (property === 'successes' || property === 'failures' || property === 'timeouts')) {
      addSample(b, latencyRunTime || 0);
    }
  }

  /** Counts `property` at `now`, with a latency sample when percentiles are on. */
  countTimed (now, property, latency) {
    const b = this.bucketAt(now);
    b[property]++;
    if (this.rollingPercentilesEnabled) addSample(b, latency || 0);
  }

  open () { this.bucketAt(Date.now()).isCircuitBreakerOpen = true; }

  close () { this.bucketAt(Date.now()).isCircuitBreakerOpen = false; }

  shutdown () {
    this.removeAllListeners();
    this._stopSnapshots();
    this._frozen = true;
  }

  // 'snapshot' needs a timer; run it only while someone listens, at the
  // instants Opossum's setInterval would (construction + k * interval).
  _watchSnapshotListeners () {
    if (!this.enableSnapshots) return;
    this.on('newListener', name => {
      if (name === 'snapshot' && this._snapshotTimer === null && !this._frozen) {
        this._startSnapshots();
      }
    });
    this.on('removeListener', name => {
      if (name === 'snapshot' && this.listenerCount('snapshot') === 0) this._stopSnapshots();
    });
  }

  _startSnapshots () {
    const elapsed = Date.now() - this._origin;
    const delay = this._interval - (elapsed % this._interval);
    const tick = () => this.emit('snapshot', this.stats);
    this._snapshotTimer = setTimeout(() => {
      this._snapshotTimer = setInterval(tick, this._interval);
      this._snapshotTimer.unref();
      tick();
    }, delay);
    this._snapshotTimer.unref();
  }

  _stopSnapshots () {
    if (this._snapshotTimer !== null) {
      clearTimeout(this._snapshotTimer); // clears an interval too
      this._snapshotTimer = null;
    }
  }
}

module.exports = { Status, COUNTERS };
