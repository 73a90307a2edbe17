/** The read service's metrics, each a no-op unless a test gives its own (the ones it counts). */
import type { ReadServiceOptions } from '../../src/cache/read/read-service.js';

export type ReadMetrics = NonNullable<ReadServiceOptions['metrics']>;

export function readMetrics(counting: Partial<ReadMetrics> = {}): ReadMetrics {
  return {
    coalesced: () => undefined,
    l1Lookup: () => undefined,
    storeLookup: () => undefined,
    revalidation: () => undefined,
    prefetch: () => undefined,
    invalidation: () => undefined,
    ...counting,
  };
}
