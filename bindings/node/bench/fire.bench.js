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
// The `floor` column is not a breaker: it is the least work any fire() that
// keeps Opossum's observable behaviour must do per call (two Date.now() for
// the latency and the window, a promise of its own settled after the
// action's, and a setTimeout/clearTimeout pair for the default timeout),
// measured in the same run. How close the breaker is to it, and how far
// Opossum is, says where the remaining time goes (docs/performance.md).
//
//   npm install && node bench/fire.bench.js   (from bindings/node)

const Opossum = require('opossum');
const CircuitBreaker = require('../lib/circuit_breaker');

const REPEATS = Number(process.env.REPEATS || 7);
const OPS = Number(process.env.OPS || 200000);

const noop = () => {};

let capturedResolve;
function capture (resolve) { capturedResolve = resolve; }
function onTimeout () {}

class Floor {
  constructor (action) {
    this.action = action;
    this.latency = 0;
    // As the breaker does: keeps Node's list of 10 s timers alive between
    // calls, so clearing a call's timer does not tear it down.
    this.anchor = setInterval(noop, 10000);
    this.anchor.unref();
  }

  fire (...args) {
    const start = Date.now();
    const outer = new Promise(capture);
    const resolve = capturedResolve;
    const timer = setTimeout(onTimeout, 10000);
    const result = this.action.apply(this, args);
    const promise = result instanceof Promise ? result : Promise.resolve(result);
    promise.then(value => {
      clearTimeout(timer);
      this.latency += Date.now() - start;
      resolve(value);
    });
    return outer;
  }

  open () {}
  shutdown () { clearInterval(this.anchor); }
}

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
  console.log('case                ours ns/op  opossum ns/op  speed-up  floor ns/op');
  for (const [mode, width] of [['batch', 1000], ['seq', 1]]) {
    for (const [name, make] of Object.entries(CASES)) {
      await timeCase(make, CircuitBreaker, width); // warm up all three
      await timeCase(make, Opossum, width);
      await timeCase(make, Floor, width);
      const closed = name !== 'open-reject';
      const ours = [];
      const theirs = [];
      const floor = [];
      for (let r = 0; r < REPEATS; r++) {
        ours.push(await timeCase(make, CircuitBreaker, width));
        theirs.push(await timeCase(make, Opossum, width));
        if (closed) floor.push(await timeCase(make, Floor, width));
      }
      const a = median(ours);
      const o = median(theirs);
      const f = closed ? median(floor).toFixed(0) : '-';
      const label = `${name} ${mode}`.padEnd(19);
      console.log(`${label} ${a.toFixed(0).padStart(10)}  ${o.toFixed(0).padStart(13)}  ${(o / a).toFixed(1).padStart(7)}x` +
        `  ${f.padStart(8)}`);
    }
  }
}

module.exports = { Floor };
if (require.main === module) main();
