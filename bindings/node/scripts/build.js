#!/usr/bin/env node
// npm's `install` script: configures and builds the addon with CMake into
// build/ (build/fusebox_node.node). Uses the Node headers already installed
// (no download); honours CMAKE_CXX_COMPILER_LAUNCHER (e.g. ccache) and
// FUSEBOX_NODE_BUILD_TYPE (default Release). docs/node.md.
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

function fail(message) {
  process.stderr.write(`fusebox: ${message}\n`);
  process.exit(1);
}

function run(args) {
  process.stdout.write(`fusebox: cmake ${args.join(' ')}\n`);
  const r = spawnSync('cmake', args, { cwd: root, stdio: 'inherit' });
  if (r.error) fail(`could not run cmake: ${r.error.message}`);
  if (r.status !== 0) fail(`cmake ${args[0]} ${args[1]} failed (exit ${r.status})`);
}

const probe = spawnSync('cmake', ['--version'], { encoding: 'utf8' });
if (probe.error || probe.status !== 0) {
  fail('cmake (>= 3.25) is required to build the native addon and was not found on PATH ' +
       '(Debian: apt-get install cmake g++)');
}

const headerDirs = [
  process.env.FUSEBOX_NODE_API_INCLUDE_DIR,
  path.resolve(process.execPath, '..', '..', 'include', 'node'),
  '/usr/include/node',
  '/usr/local/include/node',
].filter(Boolean);
const headers = headerDirs.find((d) => fs.existsSync(path.join(d, 'node_api.h')));
if (!headers) {
  fail(`the Node-API headers (node_api.h) were not found in ${headerDirs.join(', ')}; ` +
       'install them (Debian: nodejs ships /usr/include/node) or set FUSEBOX_NODE_API_INCLUDE_DIR. ' +
       'Nothing is downloaded at build time.');
}

const buildType = process.env.FUSEBOX_NODE_BUILD_TYPE || 'Release';
const configure = ['-S', '.', '-B', 'build', `-DCMAKE_BUILD_TYPE=${buildType}`,
                   `-DFUSEBOX_NODE_API_INCLUDE_DIR=${headers}`];
if (process.env.CMAKE_CXX_COMPILER_LAUNCHER) {
  configure.push(`-DCMAKE_CXX_COMPILER_LAUNCHER=${process.env.CMAKE_CXX_COMPILER_LAUNCHER}`);
}
run(configure);
// `-j N`, N one job per core (FUSEBOX_NODE_JOBS overrides): a bare -j lets
// make start every compile at once.
const jobs = process.env.FUSEBOX_NODE_JOBS || String(require('node:os').availableParallelism());
run(['--build', 'build', '-j', jobs]);
