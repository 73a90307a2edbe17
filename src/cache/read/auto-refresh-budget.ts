/**
 * The ceiling on what automatic lifetimes may cost the upstream (docs/cache.md#automatic-lifetimes):
 * a page of an `autoTtl` resource gets a lifetime shorter than its policy's `ttl` only with a token
 * from this bucket; without one it lives `ttl`, as under the fixed TTL. So auto lifetimes cost the
 * upstream at most what the fixed `ttl` would, plus this many refreshes a second. The tokens go to
 * the pages refreshed first, which under a Zipf of reads are the pages read most: where a short
 * lifetime spares the most answers from being stale.
 *
 * The rate is the replica's ceiling, or its share of the fleet's (the fleet's over the replicas
 * counted live, src/platform/redis/replica-count.ts), whichever is lower; the bucket holds a second's worth.
 */
import { TokenBucket } from '../../platform/token-bucket.js';

export interface AutoRefreshBudgetOptions {
  /** Refreshes a second this replica may start early, at most. */
  readonly perReplica: number;
  /** Refreshes a second the fleet may start early, at most; 0: no fleet ceiling. */
  readonly perFleet: number;
  /** Replicas running now (1 without a count). */
  readonly replicas: () => number;
  /** Milliseconds, monotonic. */
  readonly now?: () => number;
}

export class AutoRefreshBudget {
  readonly #options: AutoRefreshBudgetOptions;
  /** Refilled at the rate in force, holding a second's worth. */
  readonly #bucket: TokenBucket;
  #granted = 0;
  #refused = 0;

  constructor(options: AutoRefreshBudgetOptions) {
    this.#options = options;
    this.#bucket = new TokenBucket(
      () => ({ perSecond: this.rate(), burst: this.rate() }),
      options.now ?? (() => performance.now()),
    );
  }

  /** Refreshes a second now: the replica's ceiling or its share of the fleet's, the lower. */
  rate(): number {
    const { perReplica, perFleet, replicas } = this.#options;
    const share = perFleet > 0 ? perFleet / Math.max(1, replicas()) : Number.POSITIVE_INFINITY;
    return Math.min(perReplica, share);
  }

  /** One early refresh, if the ceiling allows it now (a rate under one a second holds no whole token). */
  take(): boolean {
    const granted = this.rate() >= 1 && this.#bucket.take(1).taken;
    if (granted) this.#granted += 1;
    else this.#refused += 1;
    return granted;
  }

  /** Early refreshes granted and refused since the start. */
  counts(): { readonly granted: number; readonly refused: number } {
    return { granted: this.#granted, refused: this.#refused };
  }
}
