// Seed 000's CircuitBreakerPort on fusebox: breakers per key, in one bounded
// Registry per circuit policy (the options object the use case passes), with
// Resilience4j's decisions. shouldTrip(e) === false leaves an error uncounted;
// resetTimeoutMs(e) opens the circuit for that long at once (a quota's
// Retry-After). Note: failureRateThreshold opens at >=, Opossum's
// errorThresholdPercentage at >.
import { OpenBreakerError, Registry, RegistryOptions } from 'fusebox';
import { CircuitBreakerPort, CircuitBreakerRunOptions } from './circuit-breaker.port';

export class FuseboxCircuitBreaker implements CircuitBreakerPort {
  private readonly registries = new WeakMap<CircuitBreakerRunOptions, Registry>();

  constructor(private readonly limits: RegistryOptions = { maxBreakers: 10_000, idleTtlMs: 900_000 }) {}

  async run<T>(key: string, action: () => Promise<T>, options: CircuitBreakerRunOptions): Promise<T> {
    try {
      return await this.registryFor(options).run(key, action, {
        errorFilter: (e) => options.shouldTrip !== undefined && !options.shouldTrip(e),
        openForMs: (e) => options.resetTimeoutMs?.(e),
      });
    } catch (e) {
      if (!(e instanceof OpenBreakerError)) throw e;
      throw options.openError(Number.isFinite(e.retryAfterMs) ? e.retryAfterMs : undefined);
    }
  }

  private registryFor(options: CircuitBreakerRunOptions): Registry {
    let registry = this.registries.get(options);
    if (registry === undefined) {
      registry = new Registry({
        ...this.limits,
        defaults: {
          failureRateThreshold: options.errorThresholdPercentage ?? 50,
          minimumNumberOfCalls: options.volumeThreshold ?? 10,
          slidingWindowType: 'TIME_BASED', // Opossum's 10 s rolling window
          slidingWindowSize: 10,
          waitDurationInOpenState: 30_000,
          permittedNumberOfCallsInHalfOpenState: 1, // one recovery probe
        },
      });
      this.registries.set(options, registry);
    }
    return registry;
  }
}
