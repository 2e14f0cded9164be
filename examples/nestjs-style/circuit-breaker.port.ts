// Seed 000's port, as its NestJS service declares it: use cases depend on this,
// never on a breaker library or on Redis.
export interface CircuitBreakerRunOptions {
  readonly shouldTrip?: (error: unknown) => boolean;
  readonly volumeThreshold?: number;
  readonly errorThresholdPercentage?: number;
  readonly resetTimeoutMs?: (error: unknown) => number | undefined;
  readonly openError: (retryAfterMs: number | undefined) => Error;
}

export interface CircuitBreakerPort {
  run<T>(key: string, action: () => Promise<T>, options: CircuitBreakerRunOptions): Promise<T>;
}
