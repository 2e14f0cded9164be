'use strict';
// A Node process of the fleet test (fleet.test.js): one Registry({ redis }),
// or with api 'CircuitBreaker' one CircuitBreaker({ resilience4j, redis,
// name: key }) per key, driven over IPC. Each message { id, op, ... } gets
// one reply { id, ... }.
//   init { url, defaults, api? }  the registry (or the breakers' options)
//   fail { key, n }            n failing calls; replies the outcomes
//   ok { key }                 one succeeding call: 'ran' | 'rejected'
//   try { key }                as ok, with a refusal's code, retryAt, retryAfterMs
//   held { key }               one call whose action waits for a 'release'
//                              message: sends { event: 'running' } when it
//                              starts; replies 'ran' | 'rejected'
//   read { key, value }        (Registry only) a stale-if-error read of key through the
//                              registry (freshForMs 0: every read calls
//                              unless refused): { value, stale, source }
//   provider { key, response? } (Registry only) one runProviderCall(registry, key): its action
//                              succeeds, or throws an error carrying the Meta
//                              `response` ({ status, headers, body });
//                              replies the outcome and the ProviderError's
//                              code, circuitOpen, retryAfterSeconds
//   providerHeld { key }       as held, through runProviderCall
//   state { key }              state(key), metrics(key), nowMs()
//   close                      registry.close(), or every breaker's shutdown()
const { CircuitBreaker, Registry, StaleIfErrorReader, runProviderCall } = require('..');

let registry;
const reader = new StaleIfErrorReader({ freshForMs: 0 });
let release;
let actions = 0;

// The Registry calls this driver makes, on one CircuitBreaker per key: the
// action is fire()'s argument.
class Breakers {
  constructor(redis, defaults) {
    this.options = { redis, resilience4j: defaults, timeout: false };
    this.breakers = new Map();
  }
  get(key) {
    let b = this.breakers.get(key);
    if (!b) {
      b = new CircuitBreaker((fn) => fn(), { ...this.options, name: key });
      this.breakers.set(key, b);
    }
    return b;
  }
  run(key, fn) { return this.get(key).fire(fn); }
  state(key) { return this.get(key).core.state; }
  metrics(key) { return this.get(key).core.metrics(); }
  nowMs() { return this.get('clock').core.nowMs(); }
  fleetHealth() { return this.get('clock').fleetHealth(); }
  close() { for (const b of this.breakers.values()) b.shutdown(); }
}

// A refusal (the action not called) is 'rejected': Registry.run's
// OpenBreakerError, or runProviderCall's ProviderError with circuitOpen.
function rejected(e) {
  return e.code === 'EOPENBREAKER' || e.circuitOpen === true;
}

async function outcome(promise) {
  try {
    await promise;
    return 'ran';
  } catch (e) {
    return rejected(e) ? 'rejected' : 'failed';
  }
}

// An action that waits for a 'release' message, saying when it starts.
function heldAction() {
  ++actions;
  process.send({ event: 'running' });
  return new Promise((r) => { release = r; });
}

const ops = {
  init: (m) => {
    const redis = { url: m.url, heartbeatMs: 100 };
    registry = m.api === 'CircuitBreaker' ? new Breakers(redis, m.defaults)
      : new Registry({ redis, defaults: m.defaults });
    return {};
  },
  fail: async (m) => {
    const outcomes = [];
    for (let i = 0; i < m.n; ++i) {
      outcomes.push(await outcome(registry.run(m.key, () => { ++actions; throw new Error('boom'); })));
    }
    return { outcomes };
  },
  ok: async (m) => ({ outcome: await outcome(registry.run(m.key, () => { ++actions; })), actions }),
  try: async (m) => {
    try {
      await registry.run(m.key, () => { ++actions; });
      return { outcome: 'ran', actions };
    } catch (e) {
      return { outcome: 'rejected', code: e.code, retryAt: e.retryAt, retryAfterMs: e.retryAfterMs, actions };
    }
  },
  held: async (m) => ({ outcome: await outcome(registry.run(m.key, heldAction)), actions }),
  provider: async (m) => {
    try {
      await runProviderCall(registry, m.key, async () => {
        ++actions;
        if (m.response === undefined) return 'posts';
        const e = new Error(`graph api ${m.response.status}`);
        e.response = m.response;
        throw e;
      });
      return { outcome: 'ran', actions };
    } catch (e) {
      return { outcome: rejected(e) ? 'rejected' : 'failed', code: e.code, circuitOpen: e.circuitOpen,
               retryAfterSeconds: e.retryAfterSeconds, actions };
    }
  },
  providerHeld: async (m) => ({ outcome: await outcome(runProviderCall(registry, m.key, heldAction)), actions }),
  read: async (m) => {
    const r = await reader.read(m.key, () => registry.run(m.key, () => { ++actions; return m.value; }));
    return { value: r.value, stale: r.stale, source: r.source, actions };
  },
  release: () => { if (release) release(); return {}; },
  state: (m) => ({ state: registry.state(m.key), metrics: registry.metrics(m.key),
                   now: registry.nowMs(), actions, health: registry.fleetHealth() }),
  close: () => { registry.close(); return {}; },
};

process.on('message', async (m) => {
  let reply;
  try {
    reply = await ops[m.op](m);
  } catch (e) {
    reply = { error: String(e && e.stack) };
  }
  process.send({ id: m.id, ...reply });
});
