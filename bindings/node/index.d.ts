// Types of the fusebox Node package (docs/node.md).

/** Resilience4j's circuit-breaker configuration names (docs/configuration.md).
 *  Durations: a number of milliseconds, or a string such as "10s", "250ms", "PT5S". */
export interface Resilience4jConfig {
  failureRateThreshold?: number;
  slowCallRateThreshold?: number;
  slowCallDurationThreshold?: number | string;
  permittedNumberOfCallsInHalfOpenState?: number;
  maxWaitDurationInHalfOpenState?: number | string;
  transitionToStateAfterWaitDuration?: 'OPEN' | 'CLOSED';
  slidingWindowType?: 'COUNT_BASED' | 'TIME_BASED';
  slidingWindowSize?: number;
  minimumNumberOfCalls?: number;
  waitDurationInOpenState?: number | string;
  automaticTransitionFromOpenToHalfOpenEnabled?: boolean;
  // fusebox's own
  consecutiveFailureThreshold?: number;
  openDurationJitter?: number;
  jitterSeed?: number | string;
  halfOpenPolicy?: 'FAILURE_RATE' | 'ANY_FAILURE_REOPENS' | string;
  compatibility?: 'DEFAULT' | 'RESILIENCE4J' | string;
  callTiming?: 'AUTO' | 'PRECISE' | 'COARSE' | string;
  outcomeOrder?: 'LINEARIZABLE' | 'RELAXED' | string;
}

export type BreakerState =
  | 'CLOSED' | 'OPEN' | 'HALF_OPEN' | 'DISABLED' | 'METRICS_ONLY' | 'FORCED_OPEN' | 'FORCED_CLOSED';

/** A clock tests drive by hand (fusebox::testing::ManualClock). Times are in
 *  milliseconds on a steady time line that starts at 86,400,000,000. */
export class ManualClock {
  constructor();
  /** Moves the clock forward by `ms` (>= 0), running due timers; returns the new time. */
  advance(ms: number): number;
  nowMs(): number;
}

export interface BreakerMetrics {
  state: BreakerState;
  /** Percent, or -1 below minimumNumberOfCalls. */
  failureRate: number;
  slowCallRate: number;
  bufferedCalls: number;
  failedCalls: number;
  successfulCalls: number;
  slowCalls: number;
  slowSuccessfulCalls: number;
  slowFailedCalls: number;
  notPermittedCalls: number;
  /** When OPEN (or an expiring FORCED_OPEN) ends, in the clock's ms; else null. */
  retryAt: number | null;
  openAttempts: number;
  lateOutcomes: number;
}

export interface ClockOptions {
  clock?: ManualClock;
}

/** One fusebox::CircuitBreaker. tryAcquire() then exactly one of onSuccess,
 *  onError or release per permit, each given the slot tryAcquire() returned. */
export class CoreBreaker {
  constructor(config?: Resilience4jConfig, options?: CoreBreakerOptions);
  /** A permit slot (an integer >= 0) when permitted; else -retryAt, retryAt in
   *  the clock's ms (steady time, see nowMs()), or -Infinity when unknown
   *  (FORCED_OPEN, HALF_OPEN with every probe out). With options.redis, a call
   *  that must ask Redis (the breaker's first, the first after a reconnect,
   *  the one that ends OPEN) gets a promise of that number instead, settled
   *  from the libuv pool: the event loop never waits for Redis. */
  tryAcquire(): number | Promise<number>;
  /** The outcome of the call holding `slot`; the duration decides slow or not.
   *  Without durationMs, the time since its tryAcquire() on the breaker's clock.
   *  A slot that is not pending throws an Error with code 'ENOPERMIT'.
   *  Returns the state after the outcome. */
  onSuccess(slot: number, durationMs?: number): BreakerState;
  onError(slot: number, durationMs?: number): BreakerState;
  /** Gives the slot's permit back without an outcome; returns the state. */
  release(slot: number): BreakerState;
  readonly state: BreakerState;
  readonly name: string;
  readonly pendingPermits: number;
  metrics(): BreakerMetrics;
  /** The breaker clock's now, in ms (the time line of retryAt). */
  nowMs(): number;
  transitionToOpen(): void;
  transitionToClosed(): void;
  transitionToHalfOpen(): void;
  transitionToDisabled(): void;
  transitionToForcedOpen(): void;
  transitionToMetricsOnly(): void;
  reset(): void;
  /** Gives every pending permit back (no outcome) and drops the breaker and its
   *  Redis store reference (the store's last user stops its threads, off the
   *  event loop). Afterwards every method but close(), closed, name and
   *  pendingPermits throws an Error with code 'ECLOSED'. Idempotent. */
  close(): void;
  readonly closed: boolean;
  /** The shared store's link and counters; undefined without options.redis or once closed. */
  fleetHealth(): FleetHealth | undefined;
}

export interface CoreBreakerOptions extends ClockOptions {
  /** The breaker's name; with `redis`, its key in the fleet (required then). Default "node". */
  name?: string;
  /**
   * Fleet sharing (docs/node.md, "Fleet sharing (Redis)"): the breaker shares
   * its OPEN state and its one recovery probe with every breaker of the same
   * name on this Redis. One store per distinct URL and options per process.
   */
  redis?: string | RedisOptions;
}

/** The Redis stores alive in this process: one per distinct options.redis in use
 *  by Registries, CoreBreakers and CircuitBreakers. */
export function fleetStores(): number;

export interface MetaResponse {
  status: number;
  headers?: Record<string, string | number>;
  body?: string;
}

export interface MetaClassification {
  class: 'rate-limit' | 'transient' | 'authorization' | 'invalid';
  /** Rate limits only: seconds to wait; null otherwise. */
  retryAfterSeconds: number | null;
  /** The rule that decided; never text from the body or headers. */
  reason: string;
  metaCode: number | null;
  metaSubcode: number | null;
}

export function classifyMeta(response: MetaResponse): MetaClassification;

export interface RegistryOptions extends ClockOptions {
  /** Soft bound (LRU beyond it). Default 5000. */
  maxBreakers?: number;
  /** Hard bound; 0 = 4 x maxBreakers. */
  maxBreakersHard?: number;
  /** Idle breakers are dropped after this long. Default 15 min. */
  idleTtlMs?: number;
  /** Idle sweeps at most this often. Default 1 min. */
  sweepIntervalMs?: number;
  /** Configuration of every breaker created. */
  defaults?: Resilience4jConfig;
  /**
   * Fleet sharing (docs/node.md, "Fleet sharing (Redis)"): every breaker made
   * from `defaults` shares its OPEN state and its one recovery probe through
   * this Redis (redis:// or rediss:// URL). Fails open when Redis does.
   */
  redis?: string | RedisOptions;
}

export interface RedisOptions {
  /** redis://[:password@]host:port/db or rediss://...?ca_file=... */
  url: string;
  /** Key prefix shared with the C++ services and gateways. Default "fusebox:v1:". */
  prefix?: string;
  /** The subscriber PINGs after this long without a message. Default 1000. */
  heartbeatMs?: number;
  /** Bound of every command (hence of a call that waits for the store). Default 250. */
  commandTimeoutMs?: number;
}

export interface FleetHealth {
  /** The subscriber is connected and the store's own breaker closed. */
  connected: boolean;
  commands: number;
  errors: number;
  refused: number;
  downPeriods: number;
  subscribes: number;
  events: number;
  leasesGranted: number;
  leasesBusy: number;
  dropped: number;
  /** Trips and overrides not sent: their time ran out while they waited in the store's queue. */
  expiredInQueue: number;
  /** Ops sent again on a new connection after Redis dropped the one they were sent on. */
  resent: number;
  /** Probe closes that found the lease lost (expired, or fenced by a trip elsewhere). */
  closesLost: number;
  resyncs: number;
  authFailures: number;
  /** Sentinel URLs: primaries followed, the first one included. 0 otherwise. */
  failovers: number;
  /** With `?wait_replicas=N`: trips and overrides that WAIT said reached N replicas. */
  replicaAcks: number;
  /** With `?wait_replicas=N`: those that did not within `wait_timeout`, or could not be asked. */
  replicaAckShortfalls: number;
}

export class OpenBreakerError extends Error {
  readonly code: 'EOPENBREAKER';
  readonly key: string;
  /** The clock's ms at which a call may be admitted, or Infinity if unknown. */
  readonly retryAt: number;
  /** retryAt less the clock's now: the time left (Infinity if unknown). */
  readonly retryAfterMs: number;
}

export interface RunOptions {
  /** true: the error is not counted (Opossum's errorFilter); it still rejects. */
  errorFilter?: (error: unknown) => boolean;
  /** > 0: the failure opens the breaker for this many ms at once (a Retry-After). */
  openForMs?: (error: unknown) => number | undefined;
}

export class Registry {
  constructor(options?: RegistryOptions);
  /** Runs action under the breaker of `key`; rejects with OpenBreakerError when refused. */
  run<T>(key: string, action: () => T | PromiseLike<T>, options?: RunOptions): Promise<T>;
  state(key: string): BreakerState | undefined;
  metrics(key: string): BreakerMetrics | undefined;
  readonly size: number;
  keys(): string[];
  /** Runs an idle sweep now; returns the breakers dropped. */
  sweep(): number;
  nowMs(): number;
  /** Drops every breaker and stops the Redis store's threads; later calls throw. Idempotent. */
  close(): void;
  /** The Redis store's link and counters; undefined without options.redis. */
  fleetHealth(): FleetHealth | undefined;
}

export type ConnCode = 'CONN_003' | 'CONN_008' | 'CONN_009' | 'CONN_010';

export class ProviderError extends Error {
  readonly code: ConnCode;
  /** 0 when no response was received (circuit open). */
  readonly httpStatus: number;
  readonly metaCode: number | null;
  readonly metaSubcode: number | null;
  readonly retryAfterSeconds: number | null;
  readonly retryAt: number | null;
  readonly circuitOpen: boolean;
}

export function providerCircuitKey(
  provider: string, workload: 'read' | 'publish' | 'reply' | 'token-refresh', subject: string): string;

/** fusebox::meta::RunProviderCall: `action` under the transient and quota circuits of `key`. */
export function runProviderCall<T>(
  registry: Registry, key: string, action: () => T | PromiseLike<T>): Promise<T>;

// The Opossum 10-compatible breaker (lib/circuit_breaker.js, docs/node.md).
export {
  CircuitBreaker, CircuitBreakerOptions, OpenBreakerError as CircuitOpenError, Stats, Status,
} from './lib/circuit_breaker';

// Stale-if-error reads for promises (lib/stale_reader.js, docs/stale_cache.md).
export interface Snapshot<T = unknown> { value: T; ageMs: number; }
export interface SnapshotStore<T = unknown> {
  get(key: string): Snapshot<T> | undefined | Promise<Snapshot<T> | undefined>;
  put(key: string, value: T): void | Promise<void>;
}
export interface ClockLike { now(): number; }
export interface MemorySnapshotStoreOptions {
  maxEntries?: number;
  maxBytes?: number;
  sizeOf?: (value: unknown) => number;
  clock?: ClockLike;
}
export class MemorySnapshotStore<T = unknown> implements SnapshotStore<T> {
  constructor(options?: MemorySnapshotStoreOptions);
  get(key: string): Snapshot<T> | undefined;
  put(key: string, value: T): void;
  erase(key: string): void;
  readonly size: number;
  readonly bytes: number;
}
export interface StaleIfErrorReaderOptions<T = unknown> {
  store?: SnapshotStore<T>;
  freshForMs?: number;
  maxStaleAgeMs?: number;
  mayServeStale?: (error: unknown) => boolean;
  clock?: ClockLike;
}
export interface CachedRead<T> {
  value: T;
  stale: boolean;
  ageMs: number;
  source: 'fresh_snapshot' | 'call' | 'stale_snapshot';
  hiddenError?: unknown;
  storeError?: unknown;
}
export class StaleIfErrorReader<T = unknown> {
  constructor(options?: StaleIfErrorReaderOptions<T>);
  read(key: string, fetch: () => Promise<T> | T, options?: { kind?: 'read' | 'write' }): Promise<CachedRead<T>>;
  readonly store: SnapshotStore<T>;
  readonly inFlight: number;
}
export class SingleFlight<T = unknown> {
  do(key: string, fn: () => Promise<T> | T): Promise<T>;
  readonly inFlight: number;
}
export function snapshotKey(base: string, params?: Record<string, string> | Array<[string, string]>): string;
export function defaultMayServeStale(error: unknown): boolean;
