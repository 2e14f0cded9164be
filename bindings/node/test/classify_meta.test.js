'use strict';
// classifyMeta() on the shared Meta vectors that modules/meta/src/vectors_test.cc
// runs through the C++ classifier: Node and C++ agree vector for vector.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { classifyMeta } = require('..');

const T = { timeout: 10000 };
const VECTORS = path.join(__dirname, '..', '..', '..', 'modules', 'meta', 'testdata',
                          'meta_vectors_dev.jsonl');

test('every shared dev vector classifies as expected', T, () => {
  const lines = fs.readFileSync(VECTORS, 'utf8').split('\n').filter((l) => l.trim() !== '');
  assert.ok(lines.length >= 36, `${lines.length} vectors`);
  const classes = new Set();
  for (const line of lines) {
    const v = JSON.parse(line);
    const c = classifyMeta({ status: v.status, headers: v.headers, body: v.body });
    assert.equal(c.class, v.expect_class, `${v.name}: ${c.reason}`);
    assert.equal(c.retryAfterSeconds, v.expect_retry_after_s, `${v.name}: ${c.reason}`);
    assert.equal(typeof c.reason, 'string');
    classes.add(c.class);
  }
  assert.deepEqual([...classes].sort(), ['authorization', 'invalid', 'rate-limit', 'transient']);
});

test('the fields: class, retryAfterSeconds, reason, codes', T, () => {
  const c = classifyMeta({
    status: 400,
    headers: { 'Retry-After': '30' },
    body: JSON.stringify({ error: { code: 4, error_subcode: 7, message: 'secret text' } }),
  });
  assert.equal(c.class, 'rate-limit');
  assert.equal(c.retryAfterSeconds, 30);
  assert.equal(c.metaCode, 4);
  assert.equal(c.metaSubcode, 7);
  assert.match(c.reason, /^rate-limit: /);
  assert.doesNotMatch(c.reason, /secret/, 'the reason never quotes the body');
  const t = classifyMeta({ status: 503, headers: {}, body: '<html>' });
  assert.equal(t.class, 'transient');
  assert.equal(t.retryAfterSeconds, null);
  assert.equal(classifyMeta({ status: 401 }).class, 'authorization');
});

test('bad responses throw, naming the field', T, () => {
  assert.throws(() => classifyMeta(), /response must be an object/);
  assert.throws(() => classifyMeta({ status: '400' }), (e) => e instanceof TypeError && /\.status must be a number/.test(e.message));
  assert.throws(() => classifyMeta({ status: 40000 }), (e) => e instanceof RangeError && /\.status must be an integer/.test(e.message));
  assert.throws(() => classifyMeta({ status: 400, headers: { a: {} } }), /\.headers\["a"\] must be a string/);
  assert.throws(() => classifyMeta({ status: 400, body: 12 }), /\.body must be a string/);
  // Hostile bodies are classified, not thrown on.
  assert.equal(classifyMeta({ status: 400, body: '['.repeat(100000) }).class, 'invalid');
});
