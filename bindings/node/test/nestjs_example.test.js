'use strict';
// examples/nestjs-style: seed 000's CircuitBreakerPort on fusebox. Compiled
// with tsc --strict against index.d.ts (so the declarations are checked by a
// real TypeScript service), then driven through seed 000's read sequence on a
// ManualClock: a quota error opens the account's quota circuit for its
// Retry-After, the reads after it fail fast without calling the provider, a
// 5xx burst opens only the transient circuit.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const pkg = path.join(__dirname, '..');
const example = path.join(pkg, '..', '..', 'examples', 'nestjs-style');

// Compiles the example into a scratch directory where `fusebox` resolves to
// this package; returns the directory.
function compile() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fusebox-nestjs-'));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(pkg, path.join(dir, 'node_modules', 'fusebox'), 'dir');
  // The Node typings a NestJS service has (index.d.ts extends EventEmitter).
  fs.mkdirSync(path.join(dir, 'node_modules', '@types'));
  fs.symlinkSync(path.join(pkg, 'node_modules', '@types', 'node'), path.join(dir, 'node_modules', '@types', 'node'), 'dir');
  for (const f of fs.readdirSync(example).filter((f) => f.endsWith('.ts'))) {
    fs.copyFileSync(path.join(example, f), path.join(dir, f));
  }
  const tsc = path.join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '--strict', '--target', 'es2022', '--module', 'commonjs',
    '--moduleResolution', 'node', '--esModuleInterop', '--outDir', dir, ...fs.readdirSync(dir).filter((f) => f.endsWith('.ts'))],
  { cwd: dir, stdio: 'pipe', timeout: 120000 });
  return dir;
}

class ProviderUnavailableError extends Error {
  constructor(retryAfterMs) {
    super('provider unavailable');
    this.retryAfterMs = retryAfterMs;
  }
}

const isQuota = (e) => e.kind === 'quota';
// The seed's two policies: quota trips on one quota error for its Retry-After;
// transient counts everything but quota errors, over 5 calls at 50 %.
const QUOTA = {
  shouldTrip: isQuota, volumeThreshold: 1, errorThresholdPercentage: 1,
  resetTimeoutMs: (e) => e.retryAfterMs, openError: (ms) => new ProviderUnavailableError(ms),
};
const TRANSIENT = {
  shouldTrip: (e) => !isQuota(e) && !(e instanceof ProviderUnavailableError),
  volumeThreshold: 5, errorThresholdPercentage: 50, openError: (ms) => new ProviderUnavailableError(ms),
};

function runProviderCall(port, key, action) {
  return port.run(`${key}:transient`, () => port.run(`${key}:quota`, action, QUOTA), TRANSIENT);
}

test('the NestJS port compiles against the typings and runs seed 000\'s sequence', { timeout: 180000 }, async () => {
  const dir = compile();
  try {
    const { FuseboxCircuitBreaker } = require(path.join(dir, 'fusebox-circuit-breaker.js'));
    const { ManualClock } = require('..');
    const clock = new ManualClock();
    const port = new FuseboxCircuitBreaker({ maxBreakers: 100, clock });
    const key = 'provider:instagram:read:178';
    let calls = 0;
    const provider = (outcome) => async () => {
      calls++;
      if (outcome === 'quota') throw Object.assign(new Error('(#4) limit'), { kind: 'quota', retryAfterMs: 60_000 });
      if (outcome === '5xx') throw Object.assign(new Error('502'), { kind: 'transient' });
      return outcome;
    };

    assert.equal(await runProviderCall(port, key, provider('stats')), 'stats');
    // Stats meets the account's quota: the quota circuit opens for Retry-After.
    await assert.rejects(runProviderCall(port, key, provider('quota')), /limit/);
    // Posts and comments of the same account fail fast, with the time left.
    clock.advance(15_000);
    for (const read of ['posts', 'comments']) {
      const err = await runProviderCall(port, key, provider(read)).then(() => null, (e) => e);
      assert.ok(err instanceof ProviderUnavailableError, read);
      assert.equal(err.retryAfterMs, 45_000);
    }
    assert.equal(calls, 2, 'the provider is not called while the quota circuit is open');
    // Another account is not affected.
    assert.equal(await runProviderCall(port, 'provider:instagram:read:999', provider('posts')), 'posts');
    // After Retry-After, one probe closes it.
    clock.advance(45_001);
    assert.equal(await runProviderCall(port, key, provider('posts')), 'posts');

    // A 5xx burst: the transient circuit opens; the quota circuit stays closed.
    const burst = 'provider:instagram:read:555';
    for (let i = 0; i < 5; i++) await assert.rejects(runProviderCall(port, burst, provider('5xx')), /502/);
    const err = await runProviderCall(port, burst, provider('posts')).then(() => null, (e) => e);
    assert.ok(err instanceof ProviderUnavailableError);
    assert.equal(err.retryAfterMs, 30_000);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
