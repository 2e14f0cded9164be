'use strict';
// A Node process of the fleet test (fleet.test.js): one Registry({ redis })
// driven over IPC. Each message { id, op, ... } gets one reply { id, ... }.
//   init { url, defaults }     the registry
//   fail { key, n }            n failing calls; replies the outcomes
//   ok { key }                 one succeeding call: 'ran' | 'rejected'
//   held { key }               one call whose action waits for a 'release'
//                              message: sends { event: 'running' } when it
//                              starts; replies 'ran' | 'rejected'
//   read { key, value }        a stale-if-error read of key through the
//                              registry (freshForMs 0: every read calls
//                              unless refused): { value, stale, source }
//   provider { key, response? } one runProviderCall(registry, key): its action
//                              succeeds, or throws an error carrying the Meta
//                              `response` ({ status, headers, body });
//                              replies the outcome and the ProviderError's
//                              code, circuitOpen, retryAfterSeconds
//   providerHeld { key }       as held, through runProviderCall
//   state { key }              state(key), metrics(key), nowMs()
//   close                      registry.close()
const { Registry, StaleIfErrorReader, runProviderCall } = require('..');

let registry;
const reader = new StaleIfErrorReader({ freshForMs: 0 });
let release;
let actions = 0;

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
    registry = new Registry({ redis: { url: m.url, heartbeatMs: 100 }, defaults: m.defaults });
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
