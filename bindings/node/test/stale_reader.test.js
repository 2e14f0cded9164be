'use strict';
// The stale-if-error reader for promises (lib/stale_reader.js): every branch
// of docs/stale_cache.md on both sides of its boundaries, on a manual clock.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const {
  snapshotKey, SingleFlight, MemorySnapshotStore, StaleIfErrorReader, defaultMayServeStale,
} = require('../lib/stale_reader.js');

const T = { timeout: 10000 };

class ManualClock {
  constructor(t = 1_000_000) { this.t = t; }
  now() { return this.t; }
  advance(ms) { this.t += ms; }
}

function coded(code) {
  const err = new Error(code);
  err.code = code;
  return err;
}

// A reader over a memory store on a manual clock, and a fetch that counts.
function fixture(options = {}) {
  const clock = new ManualClock();
  const store = new MemorySnapshotStore({ clock });
  const reader = new StaleIfErrorReader({ store, freshForMs: 60_000, maxStaleAgeMs: 3_600_000, ...options });
  const calls = { n: 0 };
  const ok = (value) => async () => { calls.n++; return value; };
  const fail = (code) => async () => { calls.n++; throw coded(code); };
  return { clock, store, reader, calls, ok, fail };
}

test('snapshotKey names a page as the C++ SnapshotKey does (shared vectors)', T, () => {
  const file = path.join(__dirname, '..', '..', '..', 'src', 'testdata', 'snapshot_keys.txt');
  let cases = 0;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const [expected, base, ...flat] = line.split('\t');
    const params = [];
    for (let i = 0; i < flat.length; i += 2) params.push([flat[i], flat[i + 1]]);
    assert.equal(snapshotKey(base, params), expected, line);
    cases++;
  }
  assert.ok(cases >= 10);
  // An object of parameters is the same page as its pairs, in any order.
  assert.equal(snapshotKey('posts:acct-1', { limit: '25', cursor: 'QVFI' }),
    snapshotKey('posts:acct-1', [['cursor', 'QVFI'], ['limit', '25']]));
  assert.throws(() => snapshotKey(7), /base must be a string/);
  assert.throws(() => snapshotKey('k', [['a']]), /params\[0\] must be a \[name, value\] pair/);
});

test('a fresh snapshot is served without a call; exactly freshForMs old is still fresh', T, async () => {
  const { clock, reader, calls, ok } = fixture();
  assert.deepEqual(await reader.read('posts', ok('v1')), { value: 'v1', stale: false, ageMs: 0, source: 'call' });
  clock.advance(60_000);
  const r = await reader.read('posts', ok('v2'));
  assert.deepEqual(r, { value: 'v1', stale: false, ageMs: 60_000, source: 'fresh_snapshot' });
  assert.equal(calls.n, 1);
  clock.advance(1);
  assert.equal((await reader.read('posts', ok('v2'))).source, 'call');
  assert.equal(calls.n, 2);
});

test('a failure that may be hidden serves the snapshot, stale, with its age, up to maxStaleAgeMs', T, async () => {
  const { clock, reader, ok, fail } = fixture();
  await reader.read('posts', ok('v1'));
  for (const code of ['EOPENBREAKER', 'CONN_003', 'CONN_008', 'ETIMEDOUT']) {
    clock.advance(60_001);
    const r = await reader.read('posts', fail(code));
    assert.equal(r.value, 'v1', code);
    assert.equal(r.stale, true);
    assert.equal(r.source, 'stale_snapshot');
    assert.equal(r.hiddenError.code, code);
  }
  // Inclusive at maxStaleAgeMs, refused one millisecond later.
  clock.t += 3_600_000 - 4 * 60_001;
  const edge = await reader.read('posts', fail('CONN_003'));
  assert.equal(edge.ageMs, 3_600_000);
  assert.equal(edge.stale, true);
  clock.advance(1);
  await assert.rejects(reader.read('posts', fail('CONN_003')), { code: 'CONN_003' });
});

test('authorization and invalid-request errors are never hidden; no snapshot, no stale', T, async () => {
  const { clock, reader, ok, fail } = fixture();
  await assert.rejects(reader.read('posts', fail('CONN_003')), { code: 'CONN_003' });
  await reader.read('posts', ok('v1'));
  clock.advance(60_001);
  await assert.rejects(reader.read('posts', fail('CONN_009')), { code: 'CONN_009' });
  await assert.rejects(reader.read('posts', fail('CONN_010')), { code: 'CONN_010' });
  await assert.rejects(reader.read('posts', async () => { throw new Error('no code'); }), /no code/);
  assert.equal(defaultMayServeStale(null), false);
  assert.equal(defaultMayServeStale('EOPENBREAKER'), false);
});

test('mayServeStale decides what may be hidden', T, async () => {
  const { clock, reader, ok, fail } = fixture({ mayServeStale: (err) => err.code === 'CONN_009' });
  await reader.read('posts', ok('v1'));
  clock.advance(60_001);
  assert.equal((await reader.read('posts', fail('CONN_009'))).stale, true);
  await assert.rejects(reader.read('posts', fail('EOPENBREAKER')), { code: 'EOPENBREAKER' });
});

test('a refresh replaces the snapshot and restarts its age', T, async () => {
  const { clock, reader, ok, fail } = fixture();
  await reader.read('posts', ok('v1'));
  clock.advance(120_000);
  await reader.read('posts', ok('v2'));
  clock.advance(60_001);
  const r = await reader.read('posts', fail('CONN_003'));
  assert.equal(r.value, 'v2');
  assert.equal(r.ageMs, 60_001);
});

test('writes are never cached nor served stale', T, async () => {
  const { store, reader, calls, ok, fail } = fixture();
  await reader.read('post:create', ok('w1'), { kind: 'write' });
  await reader.read('post:create', ok('w2'), { kind: 'write' });
  assert.equal(calls.n, 2);
  assert.equal(store.size, 0);
  await reader.read('posts', ok('v1'));
  await assert.rejects(reader.read('posts', fail('CONN_003'), { kind: 'write' }), { code: 'CONN_003' });
  await assert.rejects(reader.read('posts', ok('x'), { kind: 'upsert' }), /kind must be 'read' or 'write'/);
});

test('concurrent misses of one key make one call; its value or error reaches every caller', T, async () => {
  const { reader } = fixture();
  let calls = 0;
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const fetch = async () => { calls++; await gate; return { posts: [1, 2] }; };
  const reads = Array.from({ length: 100 }, () => reader.read('posts', fetch));
  await new Promise(setImmediate); // every read past its store lookup, waiting on the call
  assert.equal(reader.inFlight, 1);
  assert.equal(calls, 1);
  release();
  const results = await Promise.all(reads);
  assert.equal(calls, 1);
  for (const r of results) assert.deepEqual(r.value, { posts: [1, 2] });
  assert.equal(reader.inFlight, 0);

  // A rejection is shared too, and the key is forgotten once it settled.
  const flight = new SingleFlight();
  let n = 0;
  const boom = () => { n++; return Promise.reject(coded('CONN_003')); };
  const both = await Promise.allSettled([flight.do('k', boom), flight.do('k', boom)]);
  assert.equal(n, 1);
  assert.deepEqual(both.map((s) => s.reason.code), ['CONN_003', 'CONN_003']);
  await flight.do('k', async () => { n++; });
  assert.equal(n, 2);
  // A function that throws synchronously rejects its callers; nothing is left in flight.
  await assert.rejects(flight.do('k', () => { throw coded('SYNC'); }), { code: 'SYNC' });
  assert.equal(flight.inFlight, 0);
});

test('a store that cannot answer is a miss reported apart; a failed put loses only the snapshot', T, async () => {
  const broken = {
    get() { throw coded('ECONNREFUSED'); },
    put() { return Promise.reject(coded('ECONNREFUSED')); },
  };
  const reader = new StaleIfErrorReader({ store: broken });
  const r = await reader.read('posts', async () => 'v1');
  assert.equal(r.value, 'v1');
  assert.equal(r.storeError.code, 'ECONNREFUSED');
  await assert.rejects(reader.read('posts', async () => { throw coded('CONN_003'); }), { code: 'CONN_003' });
});

test('the memory store evicts least recently used entries to maxEntries and maxBytes', T, () => {
  const clock = new ManualClock();
  const store = new MemorySnapshotStore({ clock, maxEntries: 2 });
  store.put('a', '1');
  store.put('b', '2');
  assert.equal(store.get('a').value, '1'); // a is now the most recent
  store.put('c', '3');
  assert.equal(store.get('b'), undefined);
  assert.equal(store.size, 2);

  const small = new MemorySnapshotStore({ clock, maxBytes: 10 });
  small.put('k1', 'abc'); // 5 bytes
  small.put('k2', 'def'); // 5 bytes
  assert.equal(small.bytes, 10);
  small.put('k3', 'é'); // 2 + 2 bytes: k1 goes
  assert.equal(small.get('k1'), undefined);
  assert.equal(small.bytes, 9);
  // Larger than maxBytes alone: refused, and the key's older value dropped.
  assert.throws(() => small.put('k2', 'x'.repeat(20)), /exceeds maxBytes 10/);
  assert.equal(small.get('k2'), undefined);
  assert.equal(small.bytes, 4);
  // Objects are measured as their JSON.
  const objects = new MemorySnapshotStore({ clock, maxBytes: 20 });
  assert.throws(() => objects.put('o', { text: 'x'.repeat(20) }), /exceeds maxBytes/);
  objects.erase('missing');
  assert.equal(objects.size, 0);
});

test('bad options name the option', T, () => {
  assert.throws(() => new StaleIfErrorReader({ freshForMs: -1 }), /freshForMs must be a finite number/);
  assert.throws(() => new StaleIfErrorReader({ freshForMs: 10, maxStaleAgeMs: 5 }),
    /maxStaleAgeMs \(5\) must be >= freshForMs \(10\)/);
  assert.throws(() => new StaleIfErrorReader({ maxStaleAgeMs: Infinity }), /maxStaleAgeMs/);
  assert.throws(() => new StaleIfErrorReader({ mayServeStale: true }), /mayServeStale must be a function/);
  assert.throws(() => new StaleIfErrorReader({ store: {} }), /store must have get\(key\) and put/);
  assert.throws(() => new MemorySnapshotStore({ maxEntries: 0 }), /maxEntries must be a positive integer/);
  assert.throws(() => new MemorySnapshotStore({ maxBytes: 1.5 }), /maxBytes must be a positive integer/);
  assert.throws(() => new MemorySnapshotStore({ clock: {} }), /clock must be an object with a now\(\)/);
  assert.throws(() => new MemorySnapshotStore({ sizeOf: 3 }), /sizeOf must be a function/);
});

test('a read checks its arguments', T, async () => {
  const { reader } = fixture();
  await assert.rejects(reader.read('', async () => 1), /key must be a non-empty string/);
  await assert.rejects(reader.read('k', 'not a function'), /fetch must be a function/);
});
