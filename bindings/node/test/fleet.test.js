'use strict';
// Registry({ redis }), CoreBreaker and CircuitBreaker({ resilience4j, redis,
// name }): the fleet's OPEN state and its one recovery probe shared across
// Node processes through a real redis-server (started here on
// a free loopback port), seed 000's sequence; fail-open and a free event loop
// when Redis hangs or dies. Time is the system clock (Redis TTLs cannot be
// driven by a ManualClock): short waits, generous bounded polls, no sleeps
// as synchronisation.
const test = require('node:test');
const assert = require('node:assert/strict');
const { fork, spawnSync } = require('node:child_process');
const path = require('node:path');
const {
  CircuitBreaker, CoreBreaker, Registry, fleetStores, providerCircuitKey, runProviderCall,
} = require('..');
const { RedisServer, pollUntil } = require('./redis_server.js');

const T = { timeout: 60000 };
const POLL = 20000;  // bound of every poll: far above what any step needs
const defaults = {
  failureRateThreshold: 50, slidingWindowSize: 4, minimumNumberOfCalls: 4,
  waitDurationInOpenState: 300, permittedNumberOfCallsInHalfOpenState: 1,
};

// A forked fleet_driver.js: ask(op, fields) sends one request and resolves
// with its reply; events ({ event }) are counted in `events`.
class Driver {
  constructor() {
    this.child = fork(path.join(__dirname, 'fleet_driver.js'), [], { stdio: 'inherit' });
    this.pending = new Map();
    this.events = [];
    this.next = 0;
    this.child.on('message', (m) => {
      if (m.event) { this.events.push(m.event); return; }
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error)); else p.resolve(m);
    });
    this.exited = new Promise((r) => this.child.once('exit', (code) => r(code)));
  }
  ask(op, fields = {}) {
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, ...fields });
    });
  }
  async end() {
    if (this.child.connected) this.child.disconnect();
    return this.exited;
  }
}

// Once the OPEN wait of `circuit` is over in both processes, both call `op`
// (a held action) on `key` at once: exactly one action runs, the other call
// is refused while it is still running. Redis times the fleet's OPEN from
// when it heard of the trip, a little after the tripper's own clock: a round
// where both are refused (Redis still OPEN) is tried again. Returns the
// winner, whose action is still held, the loser, and the winner's reply.
async function oneProbe(a, b, op, key, circuit = key) {
  const waitOver = async (d) => {
    const s = await d.ask('state', { key: circuit });
    return s.metrics.retryAt !== null && s.metrics.retryAt <= s.now;
  };
  assert.ok(await pollUntil(async () => (await waitOver(a)) && (await waitOver(b)), POLL),
            'the OPEN wait never ended');
  let round;
  const admitted = await pollUntil(async () => {
    a.events.length = 0;
    b.events.length = 0;
    const tries = [a, b].map((d) => {
      const t = { driver: d, settled: undefined };
      t.reply = d.ask(op, { key }).then((r) => { t.settled = r; return r; });
      return t;
    });
    const running = (t) => t.driver.events.includes('running');
    assert.ok(await pollUntil(() => tries.some((t) => t.settled !== undefined) || tries.every(running), POLL),
              'neither call answered');
    assert.ok(!tries.every(running), 'both processes ran a probe');
    const first = tries.find((t) => t.settled !== undefined);
    assert.equal(first.settled.outcome, 'rejected', 'a held probe finished before its release');
    const other = tries.find((t) => t !== first);
    assert.ok(await pollUntil(() => other.settled !== undefined || running(other), POLL),
              'the other call neither ran nor was refused');
    if (other.settled !== undefined) {
      assert.equal(other.settled.outcome, 'rejected');
      return false;  // both refused: try again
    }
    round = { winner: other, loser: first };
    return true;
  }, POLL, 20);
  assert.ok(admitted, 'no probe was ever admitted');
  assert.deepEqual(round.loser.driver.events, [], 'both processes ran a probe');
  return { winner: round.winner.driver, loser: round.loser.driver, reply: round.winner.reply };
}

// A redis-server and two drivers on it, initialised with `init` (the api);
// all stopped after the test.
async function twoProcesses(t, init) {
  const redis = await RedisServer.start();
  const a = new Driver();
  const b = new Driver();
  t.after(async () => { a.child.kill(); b.child.kill(); await redis.stop(); });
  await a.ask('init', { url: redis.url, defaults, ...init });
  await b.ask('init', { url: redis.url, defaults, ...init });
  return { a, b };
}

// Closes both registries; each process then exits by itself, with status 0.
async function closeBoth(a, b) {
  await a.ask('close');
  await b.ask('close');
  assert.equal(await a.end(), 0);
  assert.equal(await b.end(), 0);
}

// A trips K with four failures; B, which never saw one, sees K OPEN (the
// push arrives asynchronously) and refuses a call without running its
// action. Returns B's count of actions run.
async function tripInAThenBRefuses(a, b, K) {
  assert.deepEqual((await a.ask('fail', { key: K, n: 4 })).outcomes,
                   ['failed', 'failed', 'failed', 'failed']);
  assert.equal((await a.ask('state', { key: K })).state, 'OPEN');
  assert.ok(await pollUntil(async () => (await b.ask('state', { key: K })).state === 'OPEN', POLL),
            'B never saw K OPEN');
  const before = (await b.ask('state', { key: K })).actions;
  const refused = await b.ask('try', { key: K });
  assert.deepEqual([refused.outcome, refused.code], ['rejected', 'EOPENBREAKER']);
  // retryAt is on the API's time line (epoch ms for a CircuitBreaker, the
  // registry clock's for a Registry); the time left is within K's wait.
  assert.ok(Number.isFinite(refused.retryAt), `retryAt ${refused.retryAt}`);
  assert.ok(refused.retryAfterMs >= 0 && refused.retryAfterMs <= defaults.waitDurationInOpenState,
            `retryAfterMs ${refused.retryAfterMs}`);
  assert.equal(refused.actions, before, 'B ran its action while K was OPEN');
  return before;
}

// The held probe of oneProbe() is released: it runs, its success closes
// `circuit` in both processes, and then a call (`op` on `key`) runs in both;
// both drivers close and exit cleanly.
async function probeClosesBoth({ winner, loser, reply }, a, b, op, key, circuit = key) {
  await winner.ask('release');
  assert.equal((await reply).outcome, 'ran');
  assert.equal((await winner.ask('state', { key: circuit })).state, 'CLOSED');
  assert.ok(await pollUntil(async () => (await loser.ask('state', { key: circuit })).state === 'CLOSED', POLL),
            `the loser never saw ${circuit} close`);
  assert.equal((await loser.ask(op, { key })).outcome, 'ran');
  assert.equal((await winner.ask(op, { key })).outcome, 'ran');
  await closeBoth(a, b);
}

// Exactly one probe of K runs across a and b, and its success closes K in
// both processes.
async function oneProbeClosesBoth(a, b, K) {
  await probeClosesBoth(await oneProbe(a, b, 'held', K), a, b, 'ok', K);
}

test('one Node process trips a key; another rejects it and serves its stale snapshot, and exactly one of them probes', T, async (t) => {
  const { a, b } = await twoProcesses(t, {});
  const K = 'graph:read:1784';
  // B holds the breaker (its first call re-reads the fleet's view), and a
  // snapshot of K's read from when the provider answered.
  assert.equal((await b.ask('ok', { key: K })).outcome, 'ran');
  const fresh = await b.ask('read', { key: K, value: 'posts@1' });
  assert.deepEqual([fresh.value, fresh.stale, fresh.source], ['posts@1', false, 'call']);

  const before = await tripInAThenBRefuses(a, b, K);
  // Seed 000: B's read is answered by its stale snapshot, the provider not called.
  const stale = await b.ask('read', { key: K, value: 'posts@2' });
  assert.deepEqual([stale.value, stale.stale, stale.source], ['posts@1', true, 'stale_snapshot']);
  assert.equal(stale.actions, before, 'B called the provider while K was OPEN');

  await oneProbeClosesBoth(a, b, K);
});

test('the steady state sends no Redis command per call', T, async (t) => {
  const redis = await RedisServer.start();
  const r = new Registry({ redis: redis.url, defaults });
  t.after(async () => { r.close(); await redis.stop(); });
  assert.equal(await r.run('k', () => 1), 1);  // the first call reads the fleet's view
  assert.ok(await pollUntil(() => r.fleetHealth().connected, POLL), 'never connected');
  // Connecting the subscriber marks every breaker for one re-read: the next
  // call makes it (asynchronously).
  assert.equal(await r.run('k', () => 2), 2);
  const before = r.fleetHealth();
  for (let i = 0; i < 2000; ++i) await r.run('k', () => i);
  const after = r.fleetHealth();
  // At most one read per resync (a reconnect under load), never one per call.
  assert.ok(after.commands - before.commands <= after.resyncs - before.resyncs,
            `${after.commands - before.commands} commands for 2000 calls`);
  // Nothing queued ran out, was resent or lost its lease.
  for (const k of ['dropped', 'expiredInQueue', 'resent', 'closesLost']) {
    assert.equal(after[k], 0, k);
  }
});

test('fleetHealth() counts failovers, and with ?wait_replicas=1 trips a replica acknowledged or fell short of', T, async (t) => {
  const primary = await RedisServer.start();
  const replica = await RedisServer.start({ replicaOf: primary.port });
  const alone = await RedisServer.start();
  const wait = '?wait_replicas=1&wait_timeout=100ms';
  const acked = new Registry({ redis: primary.url + wait, defaults });
  const short = new Registry({ redis: alone.url + wait, defaults });
  t.after(async () => {
    acked.close();
    short.close();
    await Promise.all([replica.stop(), primary.stop(), alone.stop()]);
  });
  for (const r of [acked, short]) {
    const h = r.fleetHealth();
    for (const f of ['failovers', 'replicaAcks', 'replicaAckShortfalls']) {
      assert.equal(typeof h[f], 'number', `fleetHealth().${f}`);
    }
    // No sentinel, no trip yet.
    assert.deepEqual([h.failovers, h.replicaAcks, h.replicaAckShortfalls], [0, 0, 0]);
  }
  assert.ok(await pollUntil(() => replica.replicating(), POLL), 'the replica never synced');

  // One trip each: the store's thread sends it, then WAIT 1 100.
  for (const r of [acked, short]) {
    for (let i = 0; i < 4; ++i) await assert.rejects(r.run('trip', () => { throw new Error('x'); }), /x/);
    assert.equal(r.state('trip'), 'OPEN');
  }
  assert.ok(await pollUntil(() => acked.fleetHealth().replicaAcks >= 1, POLL), 'the replica never acknowledged');
  assert.equal(acked.fleetHealth().replicaAckShortfalls, 0);
  // Without a replica WAIT answers 0 once its 100 ms are over.
  assert.ok(await pollUntil(() => short.fleetHealth().replicaAckShortfalls >= 1, POLL), 'no shortfall counted');
  assert.equal(short.fleetHealth().replicaAcks, 0);
});

// Runs `calls` (a promise) while a setImmediate chain measures the longest
// gap between turns of the event loop.
async function longestGap(calls) {
  let longest = 0;
  let last = process.hrtime.bigint();
  let running = true;
  const tick = () => {
    const now = process.hrtime.bigint();
    longest = Math.max(longest, Number(now - last) / 1e6);
    last = now;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return { results: await calls, longest };
  } finally {
    running = false;
  }
}

// Seed 000's Meta answers: a rate limit whose Retry-After (1 s, the shortest
// a recovery hint gives) opens the quota circuit, and a 5xx.
const rateLimited = {
  status: 429,
  headers: { 'retry-after': '1', 'content-type': 'application/json; charset=UTF-8' },
  body: JSON.stringify({ error: { message: '(#80002) There have been too many calls to this Instagram account.',
                                  type: 'OAuthException', code: 80002, fbtrace_id: 'AbC1dEfGhIjKlMn' } }),
};
const unavailable = {
  status: 503,
  headers: { 'content-type': 'application/json; charset=UTF-8' },
  body: JSON.stringify({ error: { message: 'Service temporarily unavailable', type: 'OAuthException',
                                  code: 2, is_transient: true } }),
};

async function actionsOf(...drivers) {
  let n = 0;
  for (const d of drivers) n += (await d.ask('state', { key: 'any' })).actions;
  return n;
}

test('runProviderCall: a rate limit in one process opens the quota circuit in another, and exactly one probes', T, async (t) => {
  const { a, b } = await twoProcesses(t, {});
  const K = providerCircuitKey('instagram', 'read', '17841400008460056');
  const quota = `${K}:quota`;
  // B holds K's circuits (its first call re-reads the fleet's view of both).
  assert.equal((await b.ask('provider', { key: K })).outcome, 'ran');

  // A: Meta answers 429 with Retry-After: 1. CONN_008 opens A's quota circuit.
  const limited = await a.ask('provider', { key: K, response: rateLimited });
  assert.deepEqual([limited.outcome, limited.code, limited.circuitOpen, limited.retryAfterSeconds],
                   ['failed', 'CONN_008', false, 1]);
  assert.equal((await a.ask('state', { key: quota })).state, 'OPEN');
  assert.equal((await a.ask('state', { key: `${K}:transient` })).state, 'CLOSED');
  // B never called Meta for it; the push reaches it asynchronously. Its call
  // is refused as the quota circuit refuses, and its action never runs.
  assert.ok(await pollUntil(async () => (await b.ask('state', { key: quota })).state === 'OPEN', POLL),
            'B never saw the quota circuit OPEN');
  const before = (await b.ask('state', { key: quota })).actions;
  const refused = await b.ask('provider', { key: K });
  assert.deepEqual([refused.outcome, refused.code, refused.circuitOpen], ['rejected', 'CONN_008', true]);
  assert.ok(refused.retryAfterSeconds >= 1, `retryAfterSeconds ${refused.retryAfterSeconds}`);
  assert.equal(refused.actions, before, 'B called Meta while the quota circuit was OPEN');

  // The recovery time over, both try at once: one action runs in the fleet.
  const actions = await actionsOf(a, b);
  const probe = await oneProbe(a, b, 'providerHeld', K, quota);
  assert.equal((await probe.winner.ask('state', { key: quota })).state, 'HALF_OPEN');
  assert.equal(await actionsOf(a, b), actions + 1, 'not exactly one probe across both processes');
  // Its success closes the quota circuit in both.
  await probeClosesBoth(probe, a, b, 'provider', K, quota);
});

test('runProviderCall: CONN_003 failures in one process open the transient circuit in another', T, async (t) => {
  const { a, b } = await twoProcesses(t, {});
  const K = providerCircuitKey('instagram', 'publish', '17841400008460056');
  // Seed 000: at least 3 calls, more than half failed transiently.
  for (let i = 0; i < 3; ++i) {
    const r = await a.ask('provider', { key: K, response: unavailable });
    assert.deepEqual([r.outcome, r.code, r.circuitOpen], ['failed', 'CONN_003', false]);
  }
  assert.equal((await a.ask('state', { key: `${K}:transient` })).state, 'OPEN');
  assert.equal((await a.ask('state', { key: `${K}:quota` })).state, 'CLOSED');
  // B never called K: its first call reads the fleet's view (on the libuv
  // pool) and is refused, its action never run.
  const refused = await b.ask('provider', { key: K });
  assert.deepEqual([refused.outcome, refused.code, refused.circuitOpen], ['rejected', 'CONN_003', true]);
  assert.ok(refused.retryAfterSeconds > 0 && refused.retryAfterSeconds <= 30,
            `retryAfterSeconds ${refused.retryAfterSeconds}`);
  assert.equal(refused.actions, 0, 'B called Meta while the transient circuit was OPEN');
  assert.equal((await b.ask('state', { key: `${K}:transient` })).state, 'OPEN');
  // And refuses on the spot from then on.
  assert.equal((await b.ask('provider', { key: K })).outcome, 'rejected');
  await closeBoth(a, b);
});

test('a hung, then dead, Redis: calls go on locally and the event loop never waits', T, async (t) => {
  const redis = await RedisServer.start();
  // Each command may wait 2 s: an event loop that waited for one would
  // show a gap of seconds.
  const r = new Registry({ redis: { url: redis.url, commandTimeoutMs: 2000, heartbeatMs: 100 }, defaults });
  t.after(async () => { r.close(); await redis.stop(); });
  assert.equal(await r.run('warm', () => 0), 0);
  assert.ok(await pollUntil(() => r.fleetHealth().connected, POLL), 'never connected');

  redis.pause();
  // New keys (each first call asks Redis, on the libuv pool), a known key,
  // and a trip then its probe: every call admitted, none refused by Redis.
  // runProviderCall's circuits as well: new ones ask Redis for both views.
  const keys = Array.from({ length: 12 }, (_, i) => `new:${i}`);
  const providerKeys = Array.from({ length: 6 }, (_, i) => providerCircuitKey('instagram', 'read', `${i}`));
  const hung = await longestGap(Promise.all([
    ...keys.map((k, i) => r.run(k, async () => i)),
    ...providerKeys.map((k, i) => runProviderCall(r, k, async () => `posts@${i}`)),
    ...Array.from({ length: 50 }, (_, i) => r.run('warm', () => i)),
  ]));
  assert.deepEqual(hung.results.slice(0, 12), keys.map((_, i) => i));
  assert.deepEqual(hung.results.slice(12, 18), providerKeys.map((_, i) => `posts@${i}`));
  assert.ok(hung.longest < 1000, `the event loop stalled ${hung.longest} ms while Redis hung`);

  await redis.stop();  // dead now: refused connections
  for (let i = 0; i < 4; ++i) await assert.rejects(r.run('trip', () => { throw new Error('x'); }), /x/);
  assert.equal(r.state('trip'), 'OPEN');  // the local breaker still decides
  await assert.rejects(r.run('trip', () => 1), { code: 'EOPENBREAKER' });
  const dead = await longestGap(Promise.all(Array.from({ length: 200 }, (_, i) => r.run(`dead:${i % 20}`, () => i))));
  assert.equal(dead.results.length, 200);
  assert.ok(dead.longest < 1000, `the event loop stalled ${dead.longest} ms while Redis was down`);
  // The OPEN wait ends and the local probe is admitted (the lease fails open).
  assert.ok(await pollUntil(async () => {
    try { return (await r.run('trip', () => 'probe')) === 'probe'; } catch { return false; }
  }, POLL), 'the probe was never admitted with Redis down');
  assert.equal(r.fleetHealth().connected, false);
});

test('runProviderCall: close() while a start asks Redis rejects the call as closed, its action never run', T, async (t) => {
  const redis = await RedisServer.start();
  const r = new Registry({ redis: { url: redis.url, commandTimeoutMs: 200 } });
  t.after(() => redis.stop());
  // Hung: no one (neither this call nor the store's own refresh) can read
  // the new circuits' views before close(), so the start is surely pending.
  redis.pause();
  let called = false;
  const call = runProviderCall(r, providerCircuitKey('instagram', 'read', '1'), () => { called = true; });
  assert.equal(called, false, 'admitted without asking Redis');
  r.close();
  await assert.rejects(call, /Registry: closed/);
  assert.equal(called, false);
});

// Runs `body` (a script given the package as `fusebox` and the URL as
// `url`) in a child process that must exit by itself, with status 0.
function exitsByItself(url, body) {
  const script = `const fusebox = require(${JSON.stringify(path.join(__dirname, '..'))});
    const url = ${JSON.stringify(url)};
    ${body}`;
  const child = spawnSync(process.execPath, ['-e', script], { timeout: 30000, encoding: 'utf8' });
  assert.equal(child.error, undefined);
  assert.equal(child.status, 0, child.stderr);
}

test('a process with an open Registry({ redis }) exits when its work is done', T, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.stop());
  exitsByItself(redis.url, `const r = new fusebox.Registry({ redis: url });
    r.run('k', () => 42).then((v) => { if (v !== 42) process.exit(3); });`);
});

test('options.redis: a bad URL or option is a TypeError naming it, never the password', T, () => {
  assert.throws(() => new Registry({ redis: 'redis://:s3cret@127.0.0.1:99999/0' }), (e) => {
    assert.ok(e instanceof TypeError);
    assert.match(e.message, /options\.redis/);
    assert.doesNotMatch(e.message, /s3cret/);
    return true;
  });
  assert.throws(() => new Registry({ redis: 'http://x' }), { name: 'TypeError', message: /options\.redis/ });
  assert.throws(() => new Registry({ redis: 42 }), { name: 'TypeError', message: /options\.redis/ });
  assert.throws(() => new Registry({ redis: { url: 'redis://127.0.0.1:1', heartbeatMs: -1 } }),
                { name: 'RangeError', message: /options\.redis\.heartbeatMs/ });
  const r = new Registry({});
  assert.equal(r.fleetHealth(), undefined);
  r.close();
  assert.throws(() => r.state('k'), /closed/);
  r.close();  // idempotent
});

// --- CoreBreaker and CircuitBreaker({ resilience4j, redis, name }) ----------

test('CircuitBreaker: one process trips a key; another rejects it without calling its action, and exactly one of them probes', T, async (t) => {
  const { a, b } = await twoProcesses(t, { api: 'CircuitBreaker' });
  const K = 'graph:read:1';
  assert.equal((await b.ask('ok', { key: K })).outcome, 'ran');  // B joins K's fleet
  await tripInAThenBRefuses(a, b, K);
  await oneProbeClosesBoth(a, b, K);
});

test('breakers and registries naming the same Redis share one store per process; the last one gone destroys it', T, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.stop());
  // The stores of earlier tests are destroyed on the libuv pool after their
  // last user closed: wait for them, so that only this test's count.
  assert.ok(await pollUntil(() => fleetStores() === 0, POLL), 'an earlier test left a store alive');
  const base = 0;
  const r4j = { minimumNumberOfCalls: 2, slidingWindowSize: 2 };
  const one = new CircuitBreaker(async () => 1, { resilience4j: r4j, redis: redis.url, name: 'a' });
  const two = new CircuitBreaker(async () => 2, { resilience4j: r4j, redis: redis.url, name: 'b' });
  const core = new CoreBreaker(r4j, { name: 'c', redis: { url: redis.url } });
  const registry = new Registry({ redis: redis.url, defaults: r4j });
  assert.equal(fleetStores(), base + 1);
  // Other options are another store.
  const other = new CoreBreaker(r4j, { name: 'c', redis: { url: redis.url, prefix: 'other:' } });
  assert.equal(fleetStores(), base + 2);
  assert.deepEqual([await one.fire(), await two.fire()], [1, 2]);
  // A call that must read the fleet's view first is a promise (the first
  // one, unless the store's own refresh was faster, and the first after the
  // subscriber connected); a CLOSED breaker's next ones are not.
  core.onSuccess(await core.tryAcquire());
  assert.ok(await pollUntil(() => one.fleetHealth().connected, POLL), 'never connected');
  core.onSuccess(await core.tryAcquire());
  assert.equal(typeof core.tryAcquire(), 'number');

  other.close();
  other.close();  // idempotent
  assert.equal(other.closed, true);
  assert.throws(() => other.tryAcquire(), { code: 'ECLOSED' });
  assert.equal(other.fleetHealth(), undefined);
  one.shutdown();
  await assert.rejects(one.fire(), { code: 'ESHUTDOWN' });
  assert.ok(await pollUntil(() => fleetStores() === base + 1, POLL), 'the other store stayed');
  assert.equal(await two.fire(), 2);  // the store lives on for its other users
  two.shutdown();
  core.close();  // its pending permit goes back
  assert.equal(await registry.run('r', () => 3), 3);
  registry.close();
  assert.ok(await pollUntil(() => fleetStores() === base, POLL), 'the last user left the store alive');
});

test('CircuitBreaker and CoreBreaker: redis needs resilience4j and a name; a bad URL never shows its password', T, () => {
  assert.throws(() => new CircuitBreaker(() => 1, { redis: 'redis://127.0.0.1:1', name: 'k' }),
                { name: 'TypeError', message: /options\.redis needs options\.resilience4j/ });
  assert.throws(() => new CircuitBreaker(() => 1, { resilience4j: {}, redis: 'redis://127.0.0.1:1' }),
                { name: 'TypeError', message: /options\.redis needs options\.name/ });
  for (const name of [undefined, '']) {
    assert.throws(() => new CoreBreaker({}, { name, redis: 'redis://127.0.0.1:1' }),
                  { name: 'TypeError', message: /options\.redis needs options\.name/ });
  }
  const leaks = (make) => assert.throws(make, (e) => {
    assert.ok(e instanceof TypeError, String(e));
    assert.match(e.message, /options\.redis/);
    assert.doesNotMatch(e.message, /s3cret/);
    return true;
  });
  leaks(() => new CircuitBreaker(() => 1, { resilience4j: {}, name: 'k', redis: 'redis://:s3cret@127.0.0.1:99999/0' }));
  leaks(() => new CoreBreaker({}, { name: 'k', redis: 'redis://:s3cret@127.0.0.1:99999/0' }));
  leaks(() => new CoreBreaker({}, { name: 'k', redis: { url: 'http://:s3cret@x' } }));
  assert.throws(() => new CoreBreaker({}, { name: 'k', redis: { url: 'redis://127.0.0.1:1', commandTimeoutMs: 0 } }),
                { name: 'RangeError', message: /options\.redis\.commandTimeoutMs/ });
  assert.equal(new CoreBreaker({}).fleetHealth(), undefined);
});

test('CircuitBreaker({ redis }): a hung, then dead, Redis: calls are decided locally and never hang', T, async (t) => {
  const redis = await RedisServer.start();
  const options = {
    resilience4j: defaults, timeout: false,
    redis: { url: redis.url, commandTimeoutMs: 2000, heartbeatMs: 100 },
  };
  const breakers = new Map();
  const fire = (name, fn) => {
    if (!breakers.has(name)) breakers.set(name, new CircuitBreaker((f) => f(), { ...options, name }));
    return breakers.get(name).fire(fn);
  };
  t.after(async () => { for (const b of breakers.values()) b.shutdown(); await redis.stop(); });
  assert.equal(await fire('warm', () => 0), 0);
  assert.ok(await pollUntil(() => breakers.get('warm').fleetHealth().connected, POLL), 'never connected');

  redis.pause();
  // A new breaker's first call must ask the hung Redis: a promise, settled
  // on the libuv pool, admitted once the command timed out (fail-open).
  const core = new CoreBreaker(defaults, { name: 'paused', redis: options.redis });
  const asked = core.tryAcquire();
  assert.ok(asked instanceof Promise, `tryAcquire() returned ${asked}`);
  const names = Array.from({ length: 12 }, (_, i) => `new:${i}`);
  const hung = await longestGap(Promise.all([
    ...names.map((n, i) => fire(n, async () => i)),
    ...Array.from({ length: 50 }, (_, i) => fire('warm', () => i)),
  ]));
  assert.deepEqual(hung.results.slice(0, 12), names.map((_, i) => i));
  assert.ok(hung.longest < 1000, `the event loop stalled ${hung.longest} ms while Redis hung`);
  core.onSuccess(await asked);
  core.close();

  await redis.stop();
  for (let i = 0; i < 4; ++i) await assert.rejects(fire('trip', () => { throw new Error('x'); }), /x/);
  assert.equal(breakers.get('trip').core.state, 'OPEN');  // the local breaker still decides
  await assert.rejects(fire('trip', () => 1), { code: 'EOPENBREAKER' });
  const dead = await longestGap(Promise.all(Array.from({ length: 200 }, (_, i) => fire(`dead:${i % 20}`, () => i))));
  assert.equal(dead.results.length, 200);
  assert.ok(dead.longest < 1000, `the event loop stalled ${dead.longest} ms while Redis was down`);
  assert.ok(await pollUntil(async () => {
    try { return (await fire('trip', () => 'probe')) === 'probe'; } catch { return false; }
  }, POLL), 'the probe was never admitted with Redis down');
  assert.equal(breakers.get('trip').fleetHealth().connected, false);
});

test('a process with a CircuitBreaker({ redis }) exits when its work is done, without shutdown()', T, async (t) => {
  const redis = await RedisServer.start();
  t.after(() => redis.stop());
  exitsByItself(redis.url, `const b = new fusebox.CircuitBreaker(async () => 42,
      { resilience4j: {}, redis: url, name: 'exit:1' });
    const c = new fusebox.CoreBreaker({}, { name: 'exit:2', redis: url });
    b.fire().then((v) => { if (v !== 42) process.exit(3); });
    Promise.resolve(c.tryAcquire()).then((s) => { if (!(s >= 0)) process.exit(4); });`);
});
