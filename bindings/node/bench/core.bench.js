#!/usr/bin/env node
'use strict';
// Micro-benchmarks of the Node package (docs/node.md, "Cost"). Plain node:
// each case runs RUNS times over N operations; prints the median ns/op and
// the spread, with baselines measured in the same run.
//   node bench/core.bench.js [N] [RUNS]
const { performance } = require('node:perf_hooks');
const { CircuitBreaker, CoreBreaker, Registry, OpenBreakerError, runProviderCall } = require('..');

const N = Number(process.argv[2] || 200000);
const RUNS = Number(process.argv[3] || 9);

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function bench(name, fn) {
  await fn(Math.min(N, 20000));  // warm-up
  const perOp = [];
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    await fn(N);
    perOp.push(((performance.now() - t0) * 1e6) / N);
  }
  const s = [...perOp].sort((a, b) => a - b);
  console.log(`${name.padEnd(52)} ${median(perOp).toFixed(1).padStart(8)} ns/op  ` +
              `(min ${s[0].toFixed(1)}, max ${s[s.length - 1].toFixed(1)})`);
}

let sink;
// The cheapest rejection shape other than OpenBreakerError: a prototype-only object.
function protoOnlyError(key, retryAt) {
  const e = Object.create(OpenBreakerError.prototype);
  e.message = `circuit "${key}" is open`;
  e.code = 'EOPENBREAKER';
  e.key = key;
  e.retryAt = retryAt;
  return e;
}

(async () => {
  console.log(`node ${process.version}, N=${N}, runs=${RUNS}`);
  const breaker = new CoreBreaker({});
  await bench('CoreBreaker tryAcquire() + onSuccess(slot, 1)', (n) => {
    for (let i = 0; i < n; i++) {
      const slot = breaker.tryAcquire();
      if (slot >= 0) breaker.onSuccess(slot, 1);
    }
  });
  const open = new CoreBreaker({});
  open.transitionToOpen();
  await bench('CoreBreaker tryAcquire() rejected (OPEN)', (n) => {
    for (let i = 0; i < n; i++) sink = open.tryAcquire();
  });

  await bench('baseline: await of a trivial async action', async (n) => {
    const action = async () => 1;
    for (let i = 0; i < n; i++) sink = await action();
  });
  const registry = new Registry();
  await bench('registry.run(key, trivial async action)', async (n) => {
    const action = async () => 1;
    for (let i = 0; i < n; i++) sink = await registry.run('bench:key', action);
  });
  await bench('registry.run(key, trivial sync action)', async (n) => {
    const action = () => 1;
    for (let i = 0; i < n; i++) sink = await registry.run('bench:key', action);
  });
  await bench('runProviderCall(registry, key, trivial async action)', async (n) => {
    const action = async () => 1;
    for (let i = 0; i < n; i++) sink = await runProviderCall(registry, 'provider:instagram:read:1', action);
  });
  const opossumPath = new CircuitBreaker(async () => 1, { timeout: false });
  await bench('CircuitBreaker fire(), Opossum options', async (n) => {
    for (let i = 0; i < n; i++) sink = await opossumPath.fire();
  });
  const corePath = new CircuitBreaker(async () => 1, { timeout: false, resilience4j: {} });
  await bench('CircuitBreaker fire(), resilience4j (the core decides)', async (n) => {
    for (let i = 0; i < n; i++) sink = await corePath.fire();
  });
  const coreOpen = new CircuitBreaker(async () => 1, { timeout: false, resilience4j: {} });
  coreOpen.open();
  await bench('CircuitBreaker fire() refused, resilience4j, caught', async (n) => {
    for (let i = 0; i < n; i++) {
      try { await coreOpen.fire(); } catch (e) { sink = e; }
    }
  });
  const rejecting = new Registry();
  for (let i = 0; i < 200; i++) await rejecting.run('down', () => { throw new Error('x'); }).catch(() => {});
  const premade = new OpenBreakerError('k', 1);
  await bench('baseline: await Promise.reject(premade error), caught', async (n) => {
    for (let i = 0; i < n; i++) {
      try { await Promise.reject(premade); } catch (e) { sink = e; }
    }
  });
  await bench('registry.run rejected (OPEN), caught', async (n) => {
    for (let i = 0; i < n; i++) {
      try { await rejecting.run('down', () => 1); } catch (e) { sink = e; }
    }
  });

  await bench('baseline: new Error(msg)', (n) => {
    for (let i = 0; i < n; i++) sink = new Error(`circuit "k" is open`);
  });
  await bench('new OpenBreakerError(key, retryAt) (stackTraceLimit 0)', (n) => {
    for (let i = 0; i < n; i++) sink = new OpenBreakerError('k', 1);
  });
  await bench('Object.create(OpenBreakerError.prototype) + fields', (n) => {
    for (let i = 0; i < n; i++) sink = protoOnlyError('k', 1);
  });
  if (sink === Symbol.for('never')) console.log(sink);
})();
