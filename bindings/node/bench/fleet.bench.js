#!/usr/bin/env node
'use strict';
// What sharing through Redis costs a Node process (docs/node.md, "Fleet
// sharing"): registry.run() of a trivial async action on hot keys, and a
// refusal of an OPEN key, without Redis, with Redis, and with Redis while a
// second process runs the same loop on the same keys (a fleet of two). Also
// the event loop's delay while each runs (perf_hooks.monitorEventLoopDelay,
// 1 ms resolution): a loop that waited on Redis would show it.
//   node bench/fleet.bench.js [N] [RUNS]
// Starts its own redis-server on a free loopback port (test/redis_server.js).
const { fork } = require('node:child_process');
const { performance, monitorEventLoopDelay } = require('node:perf_hooks');
const path = require('node:path');
const { Registry } = require('..');

const CHILD = process.argv[2] === '--child';  // --child URL N RUNS: the fleet's second process
const ARGS = CHILD ? process.argv.slice(4) : process.argv.slice(2);
const N = Number(ARGS[0] || 200000);
const RUNS = Number(ARGS[1] || 7);
const KEYS = Array.from({ length: 16 }, (_, i) => `provider:instagram:read:${1000 + i}`);
const DEFAULTS = { slidingWindowSize: 100, minimumNumberOfCalls: 100, waitDurationInOpenState: '1h' };

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const ok = async () => 1;
const boom = () => { throw new Error('down'); };

// ns per operation of `n` runs of `op`, and the event loop's p99/max delay.
async function measure(op, n) {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await op(n);
  const ns = ((performance.now() - t0) * 1e6) / n;
  const c = process.cpuUsage(c0);
  delay.disable();
  // CPU time too: on a shared machine wall time includes other processes'.
  const cpu = ((c.user + c.system) * 1e3) / n;
  return { ns, cpu, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 };
}

// Like a server's requests, the loops give the event loop a turn every 100
// calls (a loop of awaits alone never does, and would show no delay at all).
const turn = () => new Promise(setImmediate);

async function closedLoop(registry, n) {
  for (let i = 0; i < n; i++) {
    await registry.run(KEYS[i & 15], ok);
    if (i % 100 === 99) await turn();
  }
}

async function refusals(registry, n) {
  for (let i = 0; i < n; i++) {
    await registry.run('open-key', ok).catch(() => {});
    if (i % 100 === 99) await turn();
  }
}

// The median of RUNS measurements of each case on one registry.
async function cases(registry) {
  await closedLoop(registry, Math.min(N, 20000)); // warm-up: every key created (and read)
  for (let i = 0; i < 100; i++) await registry.run('open-key', boom).catch(() => {});
  await refusals(registry, 1000);
  const out = {};
  for (const [name, op] of [['closed', closedLoop], ['open', refusals]]) {
    const runs = [];
    for (let r = 0; r < RUNS; r++) runs.push(await measure((n) => op(registry, n), N));
    out[name] = {
      ns: median(runs.map((x) => x.ns)),
      cpu: median(runs.map((x) => x.cpu)),
      p99: median(runs.map((x) => x.p99)),
      max: Math.max(...runs.map((x) => x.max)),
    };
  }
  return out;
}

async function child(url) {
  const registry = new Registry({ defaults: DEFAULTS, redis: url });
  const result = await cases(registry);
  result.commands = registry.fleetHealth().commands;
  registry.close();
  process.send(result);
}

function line(name, r) {
  const f = (x) => `${x.ns.toFixed(0).padStart(5)} ns/op (cpu ${x.cpu.toFixed(0).padStart(5)})`;
  return `${name.padEnd(32)} closed ${f(r.closed)}, loop p99 ${r.closed.p99.toFixed(1)} ms ` +
    `max ${r.closed.max.toFixed(1)} ms; open ${f(r.open)}, p99 ${r.open.p99.toFixed(1)} ms`;
}

async function main() {
  if (CHILD) return child(process.argv[3]);
  const { RedisServer } = require(path.join(__dirname, '..', 'test', 'redis_server.js'));
  const redis = await RedisServer.start();
  try {
    console.log(`node ${process.version}, N=${N}, median of ${RUNS}`);
    console.log(line('local (no Redis)', await cases(new Registry({ defaults: DEFAULTS }))));

    const shared = new Registry({ defaults: DEFAULTS, redis: redis.url });
    const alone = await cases(shared);
    console.log(line('Redis, one process', alone));
    console.log(`  Redis commands sent by that process: ${shared.fleetHealth().commands}`);
    shared.close();

    // A fleet of two: the same loop in a second process, at the same time.
    const other = fork(__filename, ['--child', redis.url, String(N), String(RUNS)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const otherResult = new Promise((resolve, reject) => {
      other.once('message', resolve);
      other.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
    });
    const mine = new Registry({ defaults: DEFAULTS, redis: redis.url });
    const both = await cases(mine);
    const theirs = await otherResult;
    console.log(line('Redis, fleet of two (this one)', both));
    console.log(line('Redis, fleet of two (the other)', theirs));
    console.log(`  Redis commands: this process ${mine.fleetHealth().commands}, the other ${theirs.commands}`);
    mine.close();
  } finally {
    await redis.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
