'use strict';
// runProviderCall: fusebox::meta::RunProviderCall's two circuits from JS.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Registry, ManualClock, ProviderError, runProviderCall, providerCircuitKey } = require('..');

const T = { timeout: 10000 };
const KEY = 'provider:instagram:read:178';

function metaError(status, error, headers = {}) {
  const e = new Error(`graph api ${status}`);
  e.response = { status, headers, body: JSON.stringify({ error }) };
  return e;
}

test('providerCircuitKey builds the C++ key', T, () => {
  assert.equal(providerCircuitKey('instagram', 'read', '178'), KEY);
  assert.throws(() => providerCircuitKey('instagram', 'write', '178'), /workload/);
  assert.throws(() => providerCircuitKey('', 'read', '178'), RangeError);
});

test('a Meta quota error opens the quota circuit for its recovery time', T, async () => {
  const clock = new ManualClock();
  const registry = new Registry({ clock });
  const err = await runProviderCall(registry, KEY, async () => {
    throw metaError(400, { code: 4, message: 'Application request limit reached' });
  }).then(() => null, (e) => e);
  assert.ok(err instanceof ProviderError);
  assert.equal(err.code, 'CONN_008');
  assert.equal(err.httpStatus, 400);
  assert.equal(err.metaCode, 4);
  assert.equal(err.retryAfterSeconds, 120, 'no header: the 120 s default');
  assert.equal(err.circuitOpen, false);
  assert.match(err.cause.message, /graph api 400/);
  assert.doesNotMatch(err.message, /Application request limit/, 'Meta\'s message is never in ours');
  assert.equal(registry.state(`${KEY}:quota`), 'OPEN');
  assert.equal(registry.state(`${KEY}:transient`), 'CLOSED');

  let called = false;
  const rejected = await runProviderCall(registry, KEY, () => { called = true; }).then(() => null, (e) => e);
  assert.equal(called, false);
  assert.equal(rejected.code, 'CONN_008');
  assert.equal(rejected.circuitOpen, true);
  assert.ok(rejected.retryAfterSeconds > 0 && rejected.retryAfterSeconds <= 120);

  clock.advance(121000);
  assert.equal(await runProviderCall(registry, KEY, async () => 'posts'), 'posts');
  assert.equal(registry.state(`${KEY}:quota`), 'CLOSED');
});

test('Retry-After sets the quota circuit\'s open time', T, async () => {
  const clock = new ManualClock();
  const registry = new Registry({ clock });
  await assert.rejects(runProviderCall(registry, KEY, () => {
    throw { status: 429, headers: { 'Retry-After': '30' }, body: '' };
  }), (e) => e.code === 'CONN_008' && e.retryAfterSeconds === 30);
  clock.advance(29000);
  await assert.rejects(runProviderCall(registry, KEY, () => 1), (e) => e.circuitOpen);
  clock.advance(2000);
  assert.equal(await runProviderCall(registry, KEY, () => 1), 1);
});

test('5xx answers open the transient circuit (CONN_003); the quota one stays closed', T, async () => {
  const clock = new ManualClock();
  const registry = new Registry({ clock });
  for (let i = 0; i < 3; i++) {
    await assert.rejects(runProviderCall(registry, KEY, async () => { throw metaError(503, { code: 2 }); }),
                         (e) => e.code === 'CONN_003' && !e.circuitOpen && e.httpStatus === 503);
  }
  assert.equal(registry.state(`${KEY}:transient`), 'OPEN');
  assert.equal(registry.state(`${KEY}:quota`), 'CLOSED');
  const rejected = await runProviderCall(registry, KEY, () => 1).then(() => null, (e) => e);
  assert.equal(rejected.code, 'CONN_003');
  assert.equal(rejected.circuitOpen, true);
  assert.equal(rejected.stack.split('\n').length, 1, 'a rejection captures no stack');
  // Another key is unaffected.
  assert.equal(await runProviderCall(registry, 'provider:instagram:read:179', () => 'ok'), 'ok');
});

test('network errors are transient and rethrown unchanged', T, async () => {
  const registry = new Registry({ clock: new ManualClock() });
  const net = Object.assign(new Error('ECONNRESET'), { code: 'ECONNRESET' });
  for (let i = 0; i < 3; i++) {
    await assert.rejects(runProviderCall(registry, KEY, () => { throw net; }), (e) => e === net);
  }
  assert.equal(registry.state(`${KEY}:transient`), 'OPEN');
});

test('authorization and invalid answers reach the caller and trip nothing', T, async () => {
  const registry = new Registry({ clock: new ManualClock() });
  for (let i = 0; i < 10; i++) {
    await assert.rejects(runProviderCall(registry, KEY, async () => { throw metaError(401, { code: 190 }); }),
                         (e) => e.code === 'CONN_009' && e.metaCode === 190);
    await assert.rejects(runProviderCall(registry, KEY, async () => { throw metaError(400, { code: 100 }); }),
                         (e) => e.code === 'CONN_010');
  }
  assert.equal(registry.state(`${KEY}:transient`), 'CLOSED');
  assert.equal(registry.state(`${KEY}:quota`), 'CLOSED');
});

test('bad arguments', T, async () => {
  const registry = new Registry();
  await assert.rejects(runProviderCall({}, KEY, () => 1), /registry must be a Registry/);
  await assert.rejects(runProviderCall(registry, KEY), /action must be a function/);
  await assert.rejects(runProviderCall(registry, '', () => 1), /key must not be empty/);
  // An error response with a bad field: a TypeError naming it, and the call
  // counted as a transient failure (it did fail).
  await assert.rejects(runProviderCall(registry, KEY, () => { throw { status: 500, body: 7 }; }),
                       /error response\.body must be a string/);
});
