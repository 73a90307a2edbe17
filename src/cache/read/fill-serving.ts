/**
 * A read that no copy can serve, served by a fill: one per key in this process (fill-table.ts),
 * led or joined, and one for the replicas between them (fill.ts). The leader's private answer
 * (401, 403, 429, another 4xx) is its own: the others try again with their own tokens
 * (docs/cache.md). A failure, or a 429 (docs/limits.md#the-upstream-guard), is answered with the
 * stale copy while stale-if-error allows.
 */
import type { ProxyError } from '../../errors/proxy-error.js';
import type { Metrics } from '../../observability/metrics.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import type { StoreLookup } from '../stores/store.js';
import { Filler, type FillerOptions } from './fill.js';
import { type Fill, type LeadBackgroundFill, unaskedNotModified } from './fill-result.js';
import { FillTable, type Joined } from './fill-table.js';
import type { OriginAnswer, OriginFailure, ReadRequest } from './origin.js';
import type { EffectivePolicy } from './policy.js';
import { fromAnswer, fromEntry, type ReadOutcome, staleIfError, withPolicy } from './read-outcome.js';
import type { StoreFinding } from './store-reads.js';

export interface FillServingOptions extends FillerOptions {
  readonly metrics?: Pick<Metrics, 'coalesced' | 'revalidation'> | undefined;
  /** Told of every page a fill served to a request (the prefetcher's cue). */
  readonly served: (request: ReadRequest, address: CacheAddress, policy: EffectivePolicy, entry: CacheEntry) => void;
}

/** Fills a request joins or leads before it fetches with its own token regardless. */
const MAX_JOIN_ATTEMPTS = 3;

export class FillServing {
  readonly #options: FillServingOptions;
  readonly #fills = new FillTable();
  readonly #filler: Filler;

  constructor(options: FillServingOptions) {
    this.#options = options;
    this.#filler = new Filler(options);
  }

  /** Whether the key is being filled in this process. */
  isFilling(key: string): boolean {
    return this.#fills.has(key);
  }

  /** Leads (or joins) the key's fill as a background fill: a refresh's or a prefetch's. */
  readonly lead: LeadBackgroundFill = (request, address, policy, lookup) =>
    this.#joinOrLead(request, address, policy, lookup, true).fill;

  /** One fill for the key, led or joined; else the request's own fetch. */
  async serve(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    { lookup, current }: StoreFinding,
  ): Promise<ReadOutcome | ProxyError> {
    const { now } = this.#options;
    const failed = (failure: OriginFailure): ReadOutcome | ProxyError =>
      staleIfError(current, policy, now(), failure.fwdStatus, failure.upstreamMs) ?? failure.error;
    const passOn = (answer: OriginAnswer): ReadOutcome =>
      (answer.status === 429 ? staleIfError(current, policy, now(), 429, answer.elapsedMs) : undefined) ??
      fromAnswer(answer);

    for (let attempt = 0; attempt < MAX_JOIN_ATTEMPTS; attempt++) {
      const joined = this.#joinOrLead(request, address, policy, lookup);
      const result = await this.#awaitFill(request, joined);
      if (result.kind === 'entry') {
        this.#options.served(request, address, policy, result.entry);
        return this.#fromFill(result, joined.leader, policy);
      }
      // A prefetch's refusal (no upstream slot to spare) is no answer for a client that joined it.
      if (result.kind === 'failure' && result.outcome.spareRefused !== true) return failed(result.outcome);
      if (result.kind === 'failure') continue;
      if (result.kind === 'private' && joined.leader) return passOn(result.answer);
      // The leader's 401/403/429 was its own, or a background refresh stood down: this request
      // tries again with its own token (docs/cache.md), leading or joining the next fill.
    }
    // Unconditional: a 304 to it is no answer (src/upstream/fetch-read.ts makes it a failure).
    const own = await this.#options.fetch(request);
    if (own.kind === 'not-modified') return failed(unaskedNotModified(own.notModified.elapsedMs));
    return own.kind === 'failure' ? failed(own) : passOn(own.answer);
  }

  /**
   * A follower in this process waits on the leader's fill: its span links to the leader's request,
   * whose trace holds the upstream exchange (OpenTelemetry links: a causal relation between traces;
   * the follower's own trace stays its client's).
   */
  async #awaitFill(request: ReadRequest, joined: Joined): Promise<Fill> {
    const waiting = joined.leader ? undefined : request.trace?.coalescedWait('process', joined.leaderTrace);
    let result: Fill;
    try {
      result = await joined.fill;
    } catch (error) {
      waiting?.end(false);
      throw error;
    }
    waiting?.end(result.kind === 'entry' || result.kind === 'failure');
    return result;
  }

  #fromFill(result: Extract<Fill, { kind: 'entry' }>, leader: boolean, policy: EffectivePolicy): ReadOutcome {
    const collapsed = !leader || result.collapsed;
    if (collapsed) this.#options.metrics?.coalesced(leader ? 'replicas' : 'process');
    // A refresh of a stored entry forwarded a stale one (RFC 9211 §2.2: `fwd=stale`), and a 304
    // is what the upstream answered it (`fwd-status=304`), though the client gets the stored 200.
    const revalidated = result.revalidation !== undefined;
    const fwdStatus = result.revalidation === 'not_modified' ? 304 : result.entry.status;
    return fromEntry(
      // The policy in force now, as for every answer from an entry (another replica filled it).
      withPolicy(result.entry, policy),
      this.#options.now(),
      collapsed
        ? { kind: 'collapsed', fwdStatus, stale: revalidated }
        : { kind: 'miss', fwdStatus, stored: result.stored, stale: revalidated },
      // A follower waited on the leader's upstream exchange: that time is not the proxy's own.
      result.upstreamMs,
    );
  }

  #joinOrLead(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background = false,
  ): Joined {
    return this.#fills.joinOrLead(address.key, request, () =>
      this.#filler.fill(request, address, policy, lookup, background),
    );
  }
}
