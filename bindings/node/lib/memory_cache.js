'use strict';

// The in-memory cache behind the `cache` and `coalesce` options, with
// Opossum 10's behaviour: entries expire at an absolute epoch ms (0 = never),
// an expired entry is dropped when read, and a new key at capacity evicts the
// oldest insertion.
class MemoryCache {
  constructor (maxEntries) {
    this.cache = new Map();
    this.maxEntries = maxEntries ?? 2 ** 24 - 1; // the most entries a Map holds
  }

  get (key) {
    const cached = this.cache.get(key);
    if (cached) {
      if (cached.expiresAt > Date.now() || cached.expiresAt === 0) return cached.value;
      this.cache.delete(key);
    }
    return undefined;
  }

  set (key, value, expiresAt) {
    if (this.cache.size === this.maxEntries && this.get(key) === undefined) {
      this.cache.delete(this.cache.keys().next().value);
    }
    this.cache.set(key, { expiresAt, value });
  }

  delete (key) {
    this.cache.delete(key);
  }

  flush () {
    this.cache.clear();
  }
}

module.exports = MemoryCache;
