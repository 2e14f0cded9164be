'use strict';
// A real redis-server for the fleet tests, as tests/redis/redis_server.cc
// does it for C++: on a free loopback port, in a temporary directory, no
// persistence; ready once it answers PING. FUSEBOX_REDIS_SERVER overrides
// the binary (else PATH, then /usr/sbin and /usr/bin).
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

function findRedisServer() {
  if (process.env.FUSEBOX_REDIS_SERVER) return process.env.FUSEBOX_REDIS_SERVER;
  const dirs = (process.env.PATH || '').split(':').concat(['/usr/sbin', '/usr/bin']);
  for (const d of dirs) {
    if (!d) continue;
    const candidate = path.join(d, 'redis-server');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch { /* next */ }
  }
  return undefined;
}

// A port that was free a moment ago (the kernel's choice for 127.0.0.1:0).
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Sends `line` over a fresh connection: true once the reply holds `expect`,
// false on an error or after `timeoutMs`.
function answers(port, line, expect, timeoutMs) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let data = '';
    const done = (ok) => { sock.destroy(); clearTimeout(timer); resolve(ok); };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.on('connect', () => sock.write(`${line}\r\n`));
    sock.on('data', (b) => { data += b; if (data.includes(expect)) done(true); });
    sock.on('error', () => done(false));
  });
}

const ping = (port, timeoutMs) => answers(port, 'PING', '+PONG', timeoutMs);

// Polls `check` (async, returning truthy) every `everyMs` until it holds or
// `boundMs` passed; returns its last value.
async function pollUntil(check, boundMs, everyMs = 10) {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const v = await check();
    if (v || Date.now() >= deadline) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

class RedisServer {
  // `replicaOf`: a port on 127.0.0.1 whose server this one replicates
  // (--replicaof); see replicating().
  static async start({ replicaOf } = {}) {
    const binary = findRedisServer();
    if (!binary) {
      throw new Error('redis-server not found in PATH: install it (apt-get install redis-server, ' +
                      'in the Makefile\'s DEB_PACKAGES) or set FUSEBOX_REDIS_SERVER to its path');
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fusebox-node-redis-'));
    let last;
    for (let attempt = 0; attempt < 5; ++attempt) {
      const server = new RedisServer(binary, dir, await freePort(), replicaOf);
      last = await server.spawn();
      if (last === undefined) return server;
    }
    fs.rmSync(dir, { recursive: true, force: true });
    throw last;
  }

  constructor(binary, dir, port, replicaOf) {
    this.binary = binary;
    this.dir = dir;
    this.port = port;
    this.replicaOf = replicaOf;
    this.url = `redis://127.0.0.1:${port}/0`;
  }

  async spawn() {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1',
      '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', this.dir,
      '--logfile', path.join(this.dir, 'redis.log')];
    if (this.replicaOf !== undefined) args.push('--replicaof', '127.0.0.1', String(this.replicaOf));
    this.proc = spawn(this.binary, args, { stdio: 'ignore' });
    let exited = false;
    this.proc.once('exit', () => { exited = true; });
    const ready = await pollUntil(async () => exited || await ping(this.port, 200), 10000);
    if (ready && !exited) return undefined;
    this.proc.kill('SIGKILL');
    let log = '';
    try { log = fs.readFileSync(path.join(this.dir, 'redis.log'), 'utf8').slice(-2000); } catch { /* none */ }
    return new Error(`redis-server on port ${this.port} did not start${exited ? ' (exited)' : ''}; log:\n${log}`);
  }

  // A replica: whether its link to the primary is up (the initial sync
  // done), so that the primary's WAIT can count it.
  replicating() { return answers(this.port, 'INFO replication', 'master_link_status:up', 1000); }

  // SIGSTOP: the server keeps its port but answers nothing (a hung Redis).
  pause() { this.proc.kill('SIGSTOP'); }
  resume() { this.proc.kill('SIGCONT'); }

  async stop() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const gone = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGCONT');
      this.proc.kill('SIGKILL');
      await gone;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

module.exports = { RedisServer, pollUntil };
