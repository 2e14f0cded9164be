'use strict';

// fire() cost of this package's CircuitBreaker against opossum@10.0.0, in the
// same process and run, default options:
//   closed-async  fire() of a trivial async action in CLOSED
//   closed-sync   fire() of a sync action (returns a value) in CLOSED
//   open-reject   fire() in OPEN with no fallback, the rejection caught
// each twice: `batch` fires 1000 calls then awaits them all (throughput),
// `seq` awaits every call before the next (one caller, latency).
// Each case is run REPEATS times alternating the two implementations; the
// median ns/op of each and their ratio are printed.
//
//   npm install && node bench/fire.bench.js   (from bindings/node)

const Opossum = require('opossum');
const CircuitBreaker = require('../lib/circuit_breaker');

const REPEATS = Number(process.env.REPEATS || 7);
const OPS = Number(process.env.OPS || 200000);

const noop = () => {};

const CASES = {
  'closed-async': Impl => {
    const b = new Impl(async x => x);
    return { b, once: i => b.fire(i) };
  },
  'closed-sync': Impl => {
    const b = new Impl(x => x);
    return { b, once: i => b.fire(i) };
  },
  'open-reject': Impl => {
    const b = new Impl(async x => x);
    b.open();
    return { b, once: i => b.fire(i).catch(noop) };
  }
};

// Fires in batches of `width` calls awaited together (1 = sequential).
async function timeCase (make, Impl, width) {
  const { b, once } = make(Impl);
  const batch = new Array(width);
  const t0 = process.hrtime.bigint();
  for (let done = 0; done < OPS; done += batch.length) {
    for (let i = 0; i < batch.length; i++) batch[i] = once(i);
    await Promise.all(batch);
  }
  const ns = Number(process.hrtime.bigint() - t0) / OPS;
  b.shutdown();
  return ns;
}

function median (xs) {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main () {
  console.log(`node ${process.version}, ${OPS} fires per run, median of ${REPEATS} runs`);
  console.log('case                ours ns/op  opossum ns/op  speed-up');
  for (const [mode, width] of [['batch', 1000], ['seq', 1]]) {
    for (const [name, make] of Object.entries(CASES)) {
      await timeCase(make, CircuitBreaker, width); // warm up both
      await timeCase(make, Opossum, width);
      const ours = [];
      const theirs = [];
      for (let r = 0; r < REPEATS; r++) {
        ours.push(await timeCase(make, CircuitBreaker, width));
        theirs.push(await timeCase(make, Opossum, width));
      }
      const a = median(ours);
      const o = median(theirs);
      const label = `${name} ${mode}`.padEnd(19);
      console.log(`${label} ${a.toFixed(0).padStart(10)}  ${o.toFixed(0).padStart(13)}  ${(o / a).toFixed(1).padStart(7)}x`);
    }
  }
}

main();
