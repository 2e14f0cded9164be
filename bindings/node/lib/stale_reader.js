'use strict';
// Stale-if-error reads for promises: seed 000's snapshot cache, the Node side
// of fusebox's StaleIfErrorReader (include/fusebox/stale_cache.h,
// docs/stale_cache.md), with the same rules and the same snapshot keys.
//
//   read ──► fresh snapshot (age <= freshForMs)? ── yes ──► value, stale: false
//                 │ no                                      (no call at all)
//                 ▼
//            fetch() — the caller's function, which runs the breaker;
//            concurrent misses of one key share one call (SingleFlight)
//                 │ resolves ─────────────────────► store the snapshot; value
//                 │ rejects, mayServeStale(error)
//                 │       └─► snapshot <= maxStaleAgeMs old? ─► value, stale: true,
//                 │                                              ageMs, hiddenError
//                 │ any other rejection (authorization, invalid) ─► the error
//
// Stale-if-error, not stale-while-revalidate: the refresh is awaited in the
// read, and stale data is served only when it fails. Writes
// ({ kind: 'write' }) are never cached nor served stale.

const { Buffer } = require('node:buffer');

// --- snapshotKey ------------------------------------------------------------

const FNV_OFFSET = 14695981039346656037n;
const FNV_PRIME = 1099511628211n;
const MASK64 = (1n << 64n) - 1n;

function hashBytes(h, bytes) {
  for (const b of bytes) h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK64;
  return h;
}

// Length-prefixed (in UTF-8 bytes), so that ('a', 'bc') and ('ab', 'c') differ.
function hashField(h, field) {
  h = hashBytes(h, Buffer.from(`${field.length}:`, 'latin1'));
  return hashBytes(h, field);
}

function compareBytes(a, b) {
  return Buffer.compare(a, b);
}

// `${base}#p=<16 hex>`: a 64-bit FNV-1a hash of the parameters sorted by name
// then value (by their UTF-8 bytes, as C++ sorts std::string), so that a
// C++ service and a Node one on the same Redis name a page alike. Parameter
// order does not matter; different pages never share a snapshot.
function snapshotKey(base, params = {}) {
  if (typeof base !== 'string') {
    throw new TypeError(`snapshotKey: base must be a string, got ${typeof base}`);
  }
  const pairs = (Array.isArray(params) ? params : Object.entries(params)).map((pair, i) => {
    if (!Array.isArray(pair) || pair.length !== 2) {
      throw new TypeError(`snapshotKey: params[${i}] must be a [name, value] pair`);
    }
    return [Buffer.from(String(pair[0]), 'utf8'), Buffer.from(String(pair[1]), 'utf8')];
  });
  pairs.sort((x, y) => compareBytes(x[0], y[0]) || compareBytes(x[1], y[1]));
  let h = FNV_OFFSET;
  for (const [name, value] of pairs) {
    h = hashField(h, name);
    h = hashField(h, value);
  }
  return `${base}#p=${h.toString(16).padStart(16, '0')}`;
}

// --- SingleFlight -----------------------------------------------------------

// Merges concurrent calls that share a key: the first caller of do(key, fn)
// runs fn; callers arriving while its promise is pending get the same
// promise (its value, or its rejection). The key is forgotten when it
// settles, so a later do() calls again.
class SingleFlight {
  #calls = new Map();

  do(key, fn) {
    const inFlight = this.#calls.get(key);
    if (inFlight !== undefined) return inFlight;
    let call;
    try {
      call = Promise.resolve(fn());
    } catch (err) {
      call = Promise.reject(err);
    }
    const settled = call.finally(() => this.#calls.delete(key));
    this.#calls.set(key, settled);
    return settled;
  }

  // Calls in flight now (distinct keys).
  get inFlight() {
    return this.#calls.size;
  }
}

// --- MemorySnapshotStore ----------------------------------------------------

function defaultSizeOf(value) {
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return value.byteLength;
  const json = JSON.stringify(value);
  return json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
}

function positiveInteger(name, value, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

function nonNegativeMs(name, value, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a finite number of milliseconds >= 0, got ${String(value)}`);
  }
  return value;
}

function checkClock(name, clock) {
  if (clock === undefined) return { now: () => Date.now() };
  if (clock === null || typeof clock.now !== 'function') {
    throw new TypeError(`${name} must be an object with a now() method returning milliseconds`);
  }
  return clock;
}

// The in-process store: the last good value of each key with the time it was
// stored, least recently used evicted until both maxEntries and maxBytes hold
// (bytes of keys and values, values measured by sizeOf). A value larger than
// maxBytes on its own is refused (RangeError) and the key's older value
// dropped, as the C++ MemorySnapshotStore does.
class MemorySnapshotStore {
  #entries = new Map(); // key -> { value, storedAt, bytes }; Map order = LRU order
  #bytes = 0;
  #clock;
  #maxEntries;
  #maxBytes;
  #sizeOf;

  constructor(options = {}) {
    this.#clock = checkClock('MemorySnapshotStore: clock', options.clock);
    this.#maxEntries = positiveInteger('MemorySnapshotStore: maxEntries', options.maxEntries, 10000);
    this.#maxBytes = positiveInteger('MemorySnapshotStore: maxBytes', options.maxBytes, 64 * 1024 * 1024);
    if (options.sizeOf !== undefined && typeof options.sizeOf !== 'function') {
      throw new TypeError('MemorySnapshotStore: sizeOf must be a function (value) => bytes');
    }
    this.#sizeOf = options.sizeOf ?? defaultSizeOf;
  }

  // { value, ageMs } or undefined when the store has no snapshot of key.
  get(key) {
    const e = this.#entries.get(key);
    if (e === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, e);
    return { value: e.value, ageMs: Math.max(0, this.#clock.now() - e.storedAt) };
  }

  put(key, value) {
    this.erase(key);
    const bytes = Buffer.byteLength(key, 'utf8') + this.#sizeOf(value);
    if (bytes > this.#maxBytes) {
      throw new RangeError(
        `snapshot of ${bytes} bytes for key ${JSON.stringify(key.slice(0, 64))} exceeds maxBytes ${this.#maxBytes}`);
    }
    this.#entries.set(key, { value, storedAt: this.#clock.now(), bytes });
    this.#bytes += bytes;
    while (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes) {
      const [oldest] = this.#entries.keys();
      this.erase(oldest);
    }
  }

  erase(key) {
    const e = this.#entries.get(key);
    if (e === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= e.bytes;
  }

  get size() {
    return this.#entries.size;
  }

  get bytes() {
    return this.#bytes;
  }
}

// --- StaleIfErrorReader -----------------------------------------------------

// Which rejections a stale snapshot may hide by default: the circuit is open
// (EOPENBREAKER), the provider is unavailable (CONN_003) or rate limits
// (CONN_008), the call timed out (ETIMEDOUT). Never an authorization
// (CONN_009) or invalid-request (CONN_010) error: those are the caller's to
// see. The C++ DefaultMayServeStale, error code for status code.
const STALE_CODES = new Set(['EOPENBREAKER', 'CONN_003', 'CONN_008', 'ETIMEDOUT']);

function defaultMayServeStale(err) {
  return err !== null && typeof err === 'object' && STALE_CODES.has(err.code);
}

class StaleIfErrorReader {
  #store;
  #freshForMs;
  #maxStaleAgeMs;
  #mayServeStale;
  #flight = new SingleFlight();

  constructor(options = {}) {
    const store = options.store ?? new MemorySnapshotStore({ clock: options.clock });
    if (typeof store.get !== 'function' || typeof store.put !== 'function') {
      throw new TypeError('StaleIfErrorReader: store must have get(key) and put(key, value)');
    }
    this.#store = store;
    this.#freshForMs = nonNegativeMs('StaleIfErrorReader: freshForMs', options.freshForMs, 60000);
    this.#maxStaleAgeMs = nonNegativeMs('StaleIfErrorReader: maxStaleAgeMs', options.maxStaleAgeMs,
      24 * 3600 * 1000);
    if (this.#maxStaleAgeMs < this.#freshForMs) {
      throw new RangeError(`StaleIfErrorReader: maxStaleAgeMs (${this.#maxStaleAgeMs}) must be >= ` +
        `freshForMs (${this.#freshForMs})`);
    }
    if (options.mayServeStale !== undefined && typeof options.mayServeStale !== 'function') {
      throw new TypeError('StaleIfErrorReader: mayServeStale must be a function (error) => boolean');
    }
    this.#mayServeStale = options.mayServeStale ?? defaultMayServeStale;
  }

  get store() {
    return this.#store;
  }

  // Resolves to { value, stale, ageMs, source, hiddenError?, storeError? }
  // with source 'fresh_snapshot', 'call' or 'stale_snapshot'; rejects with
  // fetch's error when no snapshot may hide it. Boundaries are inclusive: a
  // snapshot exactly freshForMs old is fresh, exactly maxStaleAgeMs old is
  // still served.
  async read(key, fetch, options = {}) {
    if (typeof key !== 'string' || key.length === 0) {
      throw new TypeError('StaleIfErrorReader.read: key must be a non-empty string');
    }
    if (typeof fetch !== 'function') {
      throw new TypeError('StaleIfErrorReader.read: fetch must be a function returning a promise');
    }
    const kind = options.kind ?? 'read';
    if (kind === 'write') {
      return { value: await fetch(), stale: false, ageMs: 0, source: 'call' };
    }
    if (kind !== 'read') {
      throw new TypeError(`StaleIfErrorReader.read: kind must be 'read' or 'write', got ${String(kind)}`);
    }

    // A store that cannot answer is not a miss, but the call still decides.
    let snapshot;
    let storeError;
    try {
      snapshot = await this.#store.get(key);
    } catch (err) {
      storeError = err;
    }
    if (snapshot !== undefined && snapshot.ageMs <= this.#freshForMs) {
      return { value: snapshot.value, stale: false, ageMs: snapshot.ageMs, source: 'fresh_snapshot' };
    }

    let value;
    try {
      // The leader refreshes the snapshot, so merged callers do not write it
      // again; a failed put loses a snapshot, not the answer.
      value = await this.#flight.do(key, async () => {
        const fetched = await fetch();
        try {
          await this.#store.put(key, fetched);
        } catch {
          // Counted by the store if it counts; the caller still gets the value.
        }
        return fetched;
      });
    } catch (err) {
      if (snapshot !== undefined && snapshot.ageMs <= this.#maxStaleAgeMs && this.#mayServeStale(err)) {
        return {
          value: snapshot.value, stale: true, ageMs: snapshot.ageMs, source: 'stale_snapshot', hiddenError: err,
        };
      }
      throw err;
    }
    const read = { value, stale: false, ageMs: 0, source: 'call' };
    if (storeError !== undefined) read.storeError = storeError;
    return read;
  }

  // Calls in flight now (distinct keys).
  get inFlight() {
    return this.#flight.inFlight;
  }
}

module.exports = {
  snapshotKey,
  SingleFlight,
  MemorySnapshotStore,
  StaleIfErrorReader,
  defaultMayServeStale,
};
