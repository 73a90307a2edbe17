/**
 * The fills in flight in this process, one per key, with the trace of the request leading each
 * (tracing on): a request for a key being filled joins that fill instead of starting another.
 */
import type { RequestTrace } from '../observability/tracing.js';
import type { Fill } from './fill.js';

export interface Joined {
  readonly fill: Promise<Fill>;
  /** This request started the fill. */
  readonly leader: boolean;
  /** The leading request's trace, for a follower's link (tracing on). */
  readonly leaderTrace: RequestTrace | undefined;
}

export class FillTable {
  readonly #inflight = new Map<string, { readonly fill: Promise<Fill>; readonly trace: RequestTrace | undefined }>();

  /** Whether the key is being filled. */
  has(key: string): boolean {
    return this.#inflight.has(key);
  }

  /** Joins the key's fill, or leads it with `start`; the entry leaves the table when the fill settles. */
  joinOrLead(key: string, trace: RequestTrace | undefined, start: () => Promise<Fill>): Joined {
    const running = this.#inflight.get(key);
    if (running !== undefined) return { fill: running.fill, leader: false, leaderTrace: running.trace };
    const started = start().finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, { fill: started, trace });
    return { fill: started, leader: true, leaderTrace: undefined };
  }
}
