'use strict';

// Bytes allocated per fire() in CLOSED, this package's CircuitBreaker against
// opossum@10.0.0 and against the floor of bench/fire.bench.js (the least an
// Opossum-exact fire() must do), with a bare async call as the harness's own
// cost. V8 has no allocation counter a script can read, so each case runs in
// a child `node --trace-gc-nvp`, whose every scavenge reports the bytes
// allocated since the previous one; their sum over N fires, divided by N, is
// the figure (to within one young generation over the run: ~0.02 %).
//
//   node bench/alloc.bench.js   (from bindings/node; N=1000000 by default)

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const N = Number(process.env.N || 1000000);
const CASES = ['bare', 'floor', 'fusebox', 'opossum'];

function implementation (name) {
  if (name === 'fusebox') return require('../lib/circuit_breaker');
  if (name === 'opossum') return require('opossum');
  if (name === 'floor') return require('./fire.bench.js').Floor;
  return class Bare {
    constructor (action) { this.action = action; }
    fire (x) { return this.action(x); }
    shutdown () {}
  };
}

async function child (name) {
  const Impl = implementation(name);
  const b = new Impl(async x => x);
  const batch = new Array(1000);
  for (let done = 0; done < N; done += batch.length) {
    for (let i = 0; i < batch.length; i++) batch[i] = b.fire(i);
    await Promise.all(batch);
  }
  b.shutdown();
}

function measure (name) {
  const r = spawnSync(process.execPath, ['--trace-gc-nvp', __filename, name],
    { encoding: 'utf8', env: { ...process.env, N: String(N) }, maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`${name}: exit ${r.status}\n${r.stderr}`);
  let bytes = 0;
  for (const m of r.stdout.matchAll(/allocated=(\d+)/g)) bytes += Number(m[1]);
  return bytes / N;
}

if (process.argv[2]) {
  child(process.argv[2]);
} else {
  console.log(`node ${process.version}, ${N} fires of a trivial async action, 1000 in flight`);
  console.log('case      bytes/fire  above bare');
  const bare = measure('bare');
  for (const name of CASES) {
    const b = name === 'bare' ? bare : measure(name);
    console.log(`${name.padEnd(8)} ${b.toFixed(0).padStart(11)} ${(b - bare).toFixed(0).padStart(11)}`);
  }
}
