'use strict';
// The native addon (build/fusebox_node.node, built by `npm install`), loaded
// once for lib/index.js and the Resilience4j engine of the CircuitBreaker.

const path = require('node:path');

let native;
try {
  native = require(path.join(__dirname, '..', 'build', 'fusebox_node.node'));
} catch (e) {
  const err = new Error('fusebox: the native addon is not built (build/fusebox_node.node); ' +
                        'run `npm install` (or `node scripts/build.js`) in bindings/node: ' + e.message);
  err.cause = e;
  throw err;
}

module.exports = native;
