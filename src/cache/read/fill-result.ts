/**
 * What one fill of a key gives every request waiting on it, and what it tells whoever keeps the
 * pages' change history: the vocabulary the fill (fill.ts, fetch-and-store.ts) shares with the
 * requests, refreshes and prefetches that lead or join it.
 */
import { BadGatewayError } from '../../errors/proxy-error.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { StoreLookup } from '../stores/store.js';
import type { OriginAnswer, OriginFailure, ReadRequest } from './origin.js';
import type { EffectivePolicy } from './policy.js';

/**
 * What a refresh of a stored entry learnt (`slab_proxy_revalidations_total`): the upstream answered
 * 304 (`not_modified`), or 200 with the stored body (`identical`), or with another answer (`modified`).
 */
export type Revalidation = 'not_modified' | 'identical' | 'modified';

/**
 * What one fill from the upstream learnt about its page, for whoever keeps the pages' change
 * history (docs/cache.md#freshness-advice): a first fill (`filled`: nothing was held), or a
 * refresh of the entry held and what the upstream said of it.
 */
export interface FillObservation {
  readonly address: CacheAddress;
  readonly outcome: Revalidation | 'filled';
  /** The entry refreshed: when it was stored (or last confirmed) and what it held. */
  readonly previous: CacheEntry | undefined;
  /** The upstream's `Last-Modified` in this answer (or kept from the entry on a 304 without one). */
  readonly lastModified: string | undefined;
  /** Body bytes the upstream sent (0 for a 304). */
  readonly bytes: number;
  /** When the answer came, ms since the epoch. */
  readonly at: number;
}

/** The result of one fill, as every request waiting on it sees it. */
export type Fill =
  | {
      readonly kind: 'entry';
      readonly entry: CacheEntry;
      /** Stored, or (a revalidation) the stored entry freshened. */
      readonly stored: boolean;
      readonly upstreamMs: number | undefined;
      readonly collapsed: boolean;
      /** Set when the fill refreshed an entry of the current generation it found stored. */
      readonly revalidation?: Revalidation | undefined;
    }
  | { readonly kind: 'failure'; readonly outcome: OriginFailure }
  /** 401/403/429/other 4xx: for the request whose token it was. */
  | { readonly kind: 'private'; readonly answer: OriginAnswer }
  /** A background refresh that another replica is already doing. */
  | { readonly kind: 'skipped' };

/** Leads (or joins) a key's fill as a background fill: the refresher's and the prefetcher's way to the origin. */
export type LeadBackgroundFill = (
  request: ReadRequest,
  address: CacheAddress,
  policy: EffectivePolicy,
  lookup: StoreLookup,
) => Promise<Fill>;

/** A 304 to a request that carried no validators: no answer to it (a bad gateway). */
export function unaskedNotModified(upstreamMs: number): OriginFailure {
  return { kind: 'failure', error: new BadGatewayError(), fwdStatus: 502, upstreamStatus: 304, upstreamMs };
}
