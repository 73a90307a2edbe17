/**
 * Next-page prefetch for keyset walkers (docs/cache.md#prefetch). When a list page that
 * has more is answered, the page after it (the same filters and `per_page`, `after_id` from the
 * page's `meta.next_after_id`: src/request/next-page.ts) is fetched in the background, and so on up
 * to `depth` pages ahead of the walker, so that its next request is a hit or joins the fetch in
 * flight. A walker that keeps following is kept that far ahead: its request for a page fetched
 * ahead looks past the pages already held. A walk ahead starts only for a request that followed a
 * cursor (`after_id`, or a page fetched ahead): a reader of a first page is mostly not a walker,
 * and its next pages would be fetched for nothing.
 *
 * What keeps it safe and cheap:
 * - the request of the page that was answered, for the next read: its credential, company and
 *   partition, so the page is keyed and stored exactly as the walker's own request would store it;
 *   the fill stores only what it stores for any request (a 200 page), never an error;
 * - the fill runs as a background fill: one per key in the process (a key being filled is left
 *   alone), and none while another replica holds the key's lease;
 * - the origin is asked as a prefetch (`spare`): only with an upstream slot to spare now, never
 *   queued, never while the breaker is not closed or the company is paused
 *   (src/upstream/guarded-fetch.ts);
 * - bounded in flight, per replica and per company (prefetch-ledger.ts); a failure ends the walk
 *   ahead; a page held once is not looked past again for every hit of it.
 *
 * What it is worth is counted in the fleet, not per replica: a page fetched ahead is stored flagged
 * (src/cache/entry/entry.ts), the first request of any replica to be answered with it clears the flag in
 * the store and counts it used, and the replica that fetched it counts it wasted if the flag is
 * still there once it has expired (at the first request after that).
 */
import type { PrefetchResult } from '../../observability/metrics.js';
import { followsCursor, nextCursor, nextPageRead } from '../../request/next-page.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { Fill, LeadBackgroundFill } from '../read/fill-result.js';
import type { ReadRequest } from '../read/origin.js';
import type { EffectivePolicy } from '../read/policy.js';
import { withPolicy } from '../read/read-outcome.js';
import type { StoreReads } from '../read/store-reads.js';
import { isCurrent } from '../stores/store.js';
import type { PrefetchLedger } from './prefetch-ledger.js';
import { PrefetchStanding } from './prefetch-standing.js';

export interface PrefetcherOptions {
  /** Pages fetched ahead of the walker, at most. */
  readonly depth: number;
  readonly ledger: PrefetchLedger;
  /** The read's policy and cache address, as the read service keys it. */
  readonly addressOf: (request: ReadRequest) => { readonly policy: EffectivePolicy; readonly address: CacheAddress };
  /** A fresh copy held in this process, if any. */
  readonly held: (address: CacheAddress, policy: EffectivePolicy) => CacheEntry | undefined;
  /** Whether the key is being filled in this process. */
  readonly filling: (key: string) => boolean;
  readonly reads: StoreReads;
  /** Takes a page fetched ahead in the store: true for the one taker of the fleet (CacheStore.takeAhead). */
  readonly takeAhead: (address: CacheAddress) => Promise<boolean>;
  /** Leads the key's fill as a background fill (or joins the one in flight). */
  readonly lead: LeadBackgroundFill;
  readonly now: () => number;
  readonly count?: ((result: PrefetchResult) => void) | undefined;
  /** Told of every walk ahead, settled when it is over (tests). */
  readonly onWalk?: ((settled: Promise<void>) => void) | undefined;
}

/** A page and the request that read it: where the walk ahead stands. */
interface Place {
  readonly request: ReadRequest;
  readonly entry: CacheEntry;
}

export class Prefetcher {
  readonly #options: PrefetcherOptions;
  /** Pages already looked past (by their body, which every copy of a stored page shares): a page hit again and again starts no new walk ahead. */
  readonly #lookedPast = new WeakSet<Buffer>();
  /** Pages fetched ahead that this replica has taken (by their body): each taken once here. */
  readonly #taken = new WeakSet<Buffer>();
  /** Each page body's next cursor, read once. */
  readonly #cursors = new WeakMap<Buffer, string | null>();
  /** Keys a walk ahead is reaching (from its store lookup to its fill's end): another walk leaves them alone. */
  readonly #reaching = new Set<string>();

  constructor(options: PrefetcherOptions) {
    if (!(Number.isInteger(options.depth) && options.depth >= 1 && options.depth <= 10))
      throw new TypeError('cache.prefetch.depth must be an integer from 1 to 10');
    this.#options = options;
  }

  /**
   * A request was answered with a fresh `entry` of `address`, under `policy` (the read's, as the
   * read service found it): takes a page fetched ahead, and walks ahead where the policy says so.
   */
  served(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy, entry: CacheEntry): void {
    if (request.prefetch !== undefined) return;
    if (entry.ahead === true) this.#take(address, entry);
    // The clock is read only while pages fetched ahead are remembered: a hit with prefetch unused pays nothing.
    if (this.#options.ledger.waiting) this.#letGo(this.#options.ledger.sweep(this.#options.now()));
    if (request.read.kind !== 'list' || entry.status !== 200) return;
    if (!policy.prefetch || this.#lookedPast.has(entry.body)) return;
    // Only a walker is walked ahead of: a request that followed a cursor (`after_id`), or was
    // answered with a page fetched ahead. Most reads of a first page stop there
    // (docs/cache.md#prefetch); a page read by a walker later is still walked ahead of then.
    const walking = entry.ahead === true;
    if (!walking && !followsCursor(request.read)) return;
    this.#lookedPast.add(entry.body);
    // One page ahead of a first step along a cursor; `depth` once the walker has taken a page
    // fetched ahead of it: a reader that follows a cursor once costs the upstream one page.
    const walk = this.#walkAhead({ request, entry }, walking ? this.#options.depth : 1).catch(() => undefined);
    this.#options.onWalk?.(walk);
  }

  /** The first request of the fleet answered with a page fetched ahead counts it used. */
  #take(address: CacheAddress, entry: CacheEntry): void {
    if (this.#taken.has(entry.body)) return;
    this.#taken.add(entry.body);
    this.#takeCounting(address, 'used');
  }

  /** Pages this replica fetched ahead and stops watching: wasted if no request has taken them. */
  #letGo(pages: readonly CacheAddress[]): void {
    for (const address of pages) this.#takeCounting(address, 'wasted');
  }

  /** Takes the page in the store, and counts `result` when this was the one take of the fleet. */
  #takeCounting(address: CacheAddress, result: 'used' | 'wasted'): void {
    this.#options.takeAhead(address).then(
      (first) => {
        if (first) this.#options.count?.(result);
      },
      () => undefined, // a store never throws; nothing to count either way
    );
  }

  /** Up to `depth` pages past `from`: those held are passed over, the first missing one fetched, and on. */
  async #walkAhead(from: Place, depth: number): Promise<void> {
    let place = from;
    for (let left = depth; left > 0; left--) {
      const next = this.#nextRequest(place);
      if (next === undefined) return;
      const { policy, address } = this.#options.addressOf(next);
      const reached = await this.#reach(next, policy, address);
      if (reached === undefined) return;
      place = { request: next, entry: reached };
    }
  }

  /** The request of the page after `place`'s: the same credential, a prefetch, no client's trace. */
  #nextRequest(place: Place): ReadRequest | undefined {
    let cursor = this.#cursors.get(place.entry.body);
    if (cursor === undefined) {
      cursor = nextCursor(place.entry.body) ?? null;
      this.#cursors.set(place.entry.body, cursor);
    }
    if (cursor === null) return undefined;
    const read = nextPageRead(place.request.read, cursor);
    if (read === undefined) return undefined;
    return { ...place.request, read, trace: undefined, clientTrace: undefined, prefetch: new PrefetchStanding() };
  }

  /** The page `request` reads: held, stored, or fetched now; `undefined` when the walk ahead ends here. */
  async #reach(request: ReadRequest, policy: EffectivePolicy, address: CacheAddress): Promise<CacheEntry | undefined> {
    const { held, filling, ledger, reads, lead, now } = this.#options;
    const copy = held(address, policy);
    if (copy !== undefined) return copy;
    if (filling(address.key) || this.#reaching.has(address.key)) return this.#ends('filling');
    const company = request.principal.company;
    if (!ledger.tryStart(company)) return this.#ends('cap');
    this.#reaching.add(address.key);
    try {
      const lookup = await reads.read(address);
      if (isCurrent(lookup)) {
        const stored = withPolicy(lookup.entry, policy);
        if (now() < stored.freshUntil) {
          this.#options.count?.('cached');
          return stored;
        }
      }
      if (filling(address.key)) return this.#ends('filling');
      return this.#fetched(address, await lead(request, address, policy, lookup));
    } finally {
      this.#reaching.delete(address.key);
      ledger.end(company);
    }
  }

  /**
   * What the fill of a prefetch did. `started` counts the prefetches that asked the upstream (a
   * fill that stood down for another replica's lease, or was refused a slot, asked nothing), so
   * that over the replicas `used` + `wasted` + `failed` come to `started`.
   */
  #fetched(address: CacheAddress, fill: Fill): CacheEntry | undefined {
    if (fill.kind === 'skipped') return this.#ends('leased');
    if (fill.kind === 'failure' && fill.outcome.spareRefused === true) return this.#ends('budget');
    this.#options.count?.('started');
    if (fill.kind !== 'entry') return this.#ends('failed');
    this.#letGo(this.#options.ledger.fetched(address, fill.entry.freshUntil));
    return fill.entry;
  }

  #ends(result: PrefetchResult): undefined {
    this.#options.count?.(result);
    return undefined;
  }
}
