/**
 * The fills in flight in this process, one per key, with the trace of the request leading each
 * (tracing on): a request for a key being filled joins that fill instead of starting another. A
 * client's request that joins a prefetch's fill makes it that request's fetch (prefetch-standing.ts).
 */
import type { RequestTrace } from '../../observability/tracing.js';
import type { PrefetchStanding } from '../prefetch/prefetch-standing.js';
import type { Fill } from './fill-result.js';
import type { ReadRequest } from './origin.js';

export interface Joined {
  readonly fill: Promise<Fill>;
  /** This request started the fill. */
  readonly leader: boolean;
  /** The leading request's trace, for a follower's link (tracing on). */
  readonly leaderTrace: RequestTrace | undefined;
}

interface Running {
  readonly fill: Promise<Fill>;
  readonly trace: RequestTrace | undefined;
  readonly prefetch: PrefetchStanding | undefined;
}

export class FillTable {
  readonly #inflight = new Map<string, Running>();

  /** Whether the key is being filled. */
  has(key: string): boolean {
    return this.#inflight.has(key);
  }

  /** Joins the key's fill, or leads it with `start`; the entry leaves the table when the fill settles. */
  joinOrLead(key: string, request: Pick<ReadRequest, 'trace' | 'prefetch'>, start: () => Promise<Fill>): Joined {
    const running = this.#inflight.get(key);
    if (running !== undefined) {
      if (request.prefetch === undefined) running.prefetch?.join();
      return { fill: running.fill, leader: false, leaderTrace: running.trace };
    }
    const started = start().finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, { fill: started, trace: request.trace, prefetch: request.prefetch });
    return { fill: started, leader: true, leaderTrace: undefined };
  }
}
