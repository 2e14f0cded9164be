// Type declarations for the Opossum 10-compatible CircuitBreaker
// (lib/circuit_breaker.js). The shapes follow @types/opossum where Opossum
// and this class agree; see docs/node.md for the differences.

import { EventEmitter } from 'events';
import type { CoreBreaker, FleetHealth, ManualClock, RedisOptions, Resilience4jConfig } from '../index';

export interface CircuitBreakerOptions<TI extends unknown[] = unknown[]> {
  /** ms before a call times out (counted as a failure); false or 0 disables. Default 10000. */
  timeout?: number | false;
  /** ms in OPEN before the breaker goes half-open. Default 30000. */
  resetTimeout?: number;
  /** Opens when failures / fires * 100 is strictly above this. Default 50. */
  errorThresholdPercentage?: number;
  /** Length of the rolling window in ms. Default 10000. */
  rollingCountTimeout?: number;
  /** Number of buckets in the rolling window. Default 10. */
  rollingCountBuckets?: number;
  /** Keep latency samples for latencyMean/percentiles. Default true. */
  rollingPercentilesEnabled?: boolean;
  /** Concurrent calls allowed; more are rejected with ESEMLOCKED. */
  capacity?: number;
  /** Fires needed in the window before the breaker may open. Default 0. */
  volumeThreshold?: number;
  /** Failures do not open the breaker during the first rollingCountTimeout ms. */
  allowWarmUp?: boolean;
  /** Returns true for errors that count as successes (still rejected, no fallback). */
  errorFilter?: (error: any, ...args: TI) => boolean;
  /** Start enabled. Default true. */
  enabled?: boolean;
  name?: string;
  group?: string;
  /** Emit 'snapshot' on `status` every bucket interval while listened to. Default true. */
  enableSnapshots?: boolean;
  /** Aborted when a call times out. */
  abortController?: AbortController;
  /** Replace an aborted abortController on half-open and close. */
  autoRenewAbortController?: boolean;
  /** Restore the state of an earlier breaker (its toJSON().state). */
  state?: Partial<CircuitBreakerState>;
  /** Prime the window: a Status, or a stats object (toJSON().status). */
  status?: Status | Partial<Stats>;
  /** Deprecated in Opossum, ignored (prints a warning). */
  maxFailures?: number;
  /** Cache the promise of the first successful call per cacheGetKey(...args). */
  cache?: boolean;
  /** Cache expiry in ms; 0 = never. Default 0. */
  cacheTTL?: number;
  /** Entries of the default in-memory cache. Default 2^24 - 1. */
  cacheSize?: number;
  /** Default: (...args) => JSON.stringify(args). */
  cacheGetKey?: (...args: TI) => string;
  /** Replaces the in-memory cache; expiry is given to set() as epoch ms (0 = never). */
  cacheTransport?: { get(key: string): any; set(key: string, value: any, expiresAt: number): void; flush(): void };
  /** Calls with the same key while one is in flight share its promise. */
  coalesce?: boolean;
  /** Default: timeout. */
  coalesceTTL?: number | false;
  coalesceSize?: number;
  /** Forget the coalesced call on these outcomes; default only its TTL. */
  coalesceResetOn?: Array<'error' | 'success' | 'timeout'>;
  /** Not supported: throws a TypeError. */
  rotateBucketController?: never;
  /** Decide with fusebox's C++ core configured with Resilience4j's names instead of
   *  Opossum's window (docs/node.md). Refused together with errorThresholdPercentage,
   *  volumeThreshold, resetTimeout, allowWarmUp, rollingCountTimeout, rollingCountBuckets. */
  resilience4j?: Resilience4jConfig;
  /** With resilience4j: the core's clock (tests); default the system clock. */
  clock?: ManualClock;
  /** With resilience4j (a TypeError without it): share the core's OPEN state and its
   *  one recovery probe with every breaker of the same `name` on this Redis (then
   *  required: the circuit's key in the fleet). docs/node.md, "Fleet sharing (Redis)". */
  redis?: string | RedisOptions;
}

export interface CircuitBreakerState {
  name: string;
  enabled: boolean;
  closed: boolean;
  open: boolean;
  halfOpen: boolean;
  warmUp: boolean;
  shutdown: boolean;
  /** Epoch ms of the last open (Opossum: the construction time). */
  lastTimerAt: number | undefined;
  /** With resilience4j: the core's state. */
  coreState?: 'CLOSED' | 'OPEN' | 'HALF_OPEN' | 'DISABLED' | 'METRICS_ONLY' | 'FORCED_OPEN' | 'FORCED_CLOSED';
}

/** The counters of a bucket and of the window's totals. */
export interface Counters {
  failures: number;
  fallbacks: number;
  successes: number;
  rejects: number;
  fires: number;
  timeouts: number;
  cacheHits: number;
  cacheMisses: number;
  coalesceCacheHits: number;
  coalesceCacheMisses: number;
  semaphoreRejections: number;
}

export interface Stats extends Counters {
  percentiles: { [percentile: number]: number };
  latencyTimes: number[];
  latencyMean: number;
}

export interface Bucket extends Counters {
  percentiles: {};
  latencyTimes: number[];
  isCircuitBreakerOpen?: boolean;
}

export declare class Status extends EventEmitter {
  constructor(options?: {
    rollingCountBuckets?: number;
    rollingCountTimeout?: number;
    rollingPercentilesEnabled?: boolean;
    enableSnapshots?: boolean;
    stats?: Partial<Stats>;
  });
  readonly stats: Stats;
  /** Buckets newest first. */
  readonly window: Bucket[];
  rollingPercentilesEnabled: boolean;
  enableSnapshots: boolean;
  increment(property: keyof Bucket, latencyRunTime?: number): void;
  open(): void;
  close(): void;
  shutdown(): void;
  on(event: 'snapshot', listener: (stats: Stats) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** Rejection of a call refused by an OPEN (or half-open, trial in flight) breaker. */
export interface OpenBreakerError extends Error {
  code: 'EOPENBREAKER';
  /** Epoch ms at which the breaker goes half-open (last open + resetTimeout; with
   *  resilience4j the core's, Infinity when it cannot say). */
  retryAt: number;
  /** retryAt less now: the time left (Infinity when it cannot say). */
  retryAfterMs: number;
}

/** Errors made by the breaker itself. */
export interface BreakerError extends Error {
  code: 'EOPENBREAKER' | 'ETIMEDOUT' | 'ESEMLOCKED' | 'ESHUTDOWN';
}

export declare class CircuitBreaker<TI extends unknown[] = unknown[], TR = unknown> extends EventEmitter {
  /** True if the error was produced by a breaker, not by the action. */
  static isOurError(error: unknown): boolean;
  static newStatus(options?: ConstructorParameters<typeof Status>[0]): Status;

  constructor(action: ((...args: TI) => TR | Promise<TR>) | TR, options?: CircuitBreakerOptions<TI>);

  readonly options: CircuitBreakerOptions<TI> & Required<Pick<CircuitBreakerOptions<TI>,
    'resetTimeout' | 'errorThresholdPercentage' | 'rollingCountTimeout' | 'rollingCountBuckets' |
    'capacity' | 'volumeThreshold'>>;
  readonly action: (...args: TI) => TR | Promise<TR>;
  /** `count` is the number of free slots of `capacity`. */
  readonly semaphore: { count: number };

  readonly name: string;
  readonly group: string;
  readonly enabled: boolean;
  readonly pendingClose: boolean;
  readonly closed: boolean;
  readonly opened: boolean;
  readonly halfOpen: boolean;
  readonly isShutdown: boolean;
  readonly warmUp: boolean;
  readonly volumeThreshold: number;
  readonly status: Status;
  readonly stats: Stats;
  /** With resilience4j: the native breaker that decides; otherwise undefined. */
  readonly core?: CoreBreaker;

  fire(...args: TI): Promise<TR>;
  call(context: any, ...args: TI): Promise<TR>;
  fallback(func: ((...args: any[]) => any) | CircuitBreaker<any[], any>): this;
  open(): void;
  close(): void;
  enable(): void;
  disable(): void;
  /** With redis, also closes the core: its store reference goes (CoreBreaker.close()). */
  shutdown(): void;
  /** With resilience4j and redis: the shared store's link and counters; else undefined. */
  fleetHealth?(): FleetHealth | undefined;
  /** Empties the cache and the coalescing cache. */
  clearCache(): void;
  healthCheck(func: () => Promise<unknown>, interval?: number): void;
  getSignal(): AbortSignal | undefined;
  getAbortController(): AbortController | undefined;
  toJSON(): { state: CircuitBreakerState; status: Stats };

  on(event: 'fire', listener: (args: TI) => void): this;
  on(event: 'success', listener: (result: TR, latencyMs: number) => void): this;
  on(event: 'failure', listener: (error: any, latencyMs: number, args: TI) => void): this;
  on(event: 'timeout', listener: (error: BreakerError, latencyMs: number, args: TI) => void): this;
  on(event: 'reject', listener: (error: OpenBreakerError) => void): this;
  on(event: 'open' | 'close' | 'shutdown', listener: () => void): this;
  on(event: 'halfOpen', listener: (resetTimeout: number) => void): this;
  on(event: 'fallback', listener: (result: unknown, error: any) => void): this;
  on(event: 'semaphoreLocked', listener: (error: BreakerError, latencyMs: number) => void): this;
  on(event: 'healthCheckFailed', listener: (error: any) => void): this;
  on(event: 'cacheHit' | 'cacheMiss' | 'coalesceCacheHit' | 'coalesceCacheMiss', listener: () => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export default CircuitBreaker;
