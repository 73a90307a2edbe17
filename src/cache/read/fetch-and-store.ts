/**
 * The origin asked for a page this replica fills, and what it answers stored (docs/cache.md).
 *
 * A fill that refreshes an entry of the current generation (a background refresh, or a request
 * that found it stale) revalidates it (docs/cache.md#revalidation): it sends the upstream's
 * validators kept with it, and a 304, or a 200 whose body is byte for byte the stored one, only
 * freshens the stored entry (RFC 9111 §4.3.4): new times and validators, the body neither sent to
 * the store nor written again.
 */
import type { Metrics } from '../../observability/metrics.js';
import { createTurnGate } from '../../platform/turn-gate.js';
import { cursorOf, pageParts } from '../../request/next-page.js';
import type { CacheAddress } from '../entry/cache-key.js';
import type { CacheEntry } from '../entry/entry.js';
import { type PageWindow, pageWindowOf } from '../entry/page-window.js';
import type { L1Cache } from '../stores/l1.js';
import { type CacheStore, isCurrent, type StoreLookup } from '../stores/store.js';
import type { LifetimeEvidence } from './auto-lifetime.js';
import type { AutoRefreshBudget } from './auto-refresh-budget.js';
import { entryFor, isSameAnswer, revalidated } from './fill-entry.js';
import { type Fill, type FillObservation, type Revalidation, unaskedNotModified } from './fill-result.js';
import type { NotModified, Origin, OriginAnswer, ReadRequest, Validators } from './origin.js';
import { nextLifetimeMs } from './page-lifetime.js';
import type { EffectivePolicy } from './policy.js';

export interface FetchAndStoreOptions {
  readonly store: CacheStore;
  readonly l1: L1Cache | undefined;
  readonly fetch: Origin;
  readonly now: () => number;
  readonly metrics?: Pick<Metrics, 'revalidation'> | undefined;
  /** Told of every fill the upstream answered with a cacheable page or a 304. */
  readonly onFill?: ((observation: FillObservation) => void) | undefined;
  /** The ceiling on refreshes that automatic lifetimes start before `max` (absent: none). */
  readonly autoBudget?: Pick<AutoRefreshBudget, 'take'> | undefined;
  /** Told of each list page filled that broke the keyset rule (page-window.ts): its address. */
  readonly onWindowless?: ((address: CacheAddress) => void) | undefined;
}

/** The page being filled, and what this replica holds of it. */
interface Filling {
  readonly address: CacheAddress;
  readonly policy: EffectivePolicy;
  /** The store's lookup, or the L1's copy standing in for it. */
  readonly lookup: StoreLookup;
  /** The L1 stands in for a store that cannot be asked: what is fetched is held there. */
  readonly standingIn: boolean;
}

/**
 * The validators a refresh sends: only a 200's, since a server evaluates a precondition only for a
 * 2xx (RFC 9110 §13.2.1); a record 404 can still be found identical.
 */
function validatorsOf(current: CacheEntry | undefined): Validators | undefined {
  if (current?.status !== 200 || (current.upstreamEtag === undefined && current.lastModified === undefined))
    return undefined;
  return { etag: current.upstreamEtag, lastModified: current.lastModified };
}

/** Asks the origin for a page and stores its answer; owns the turn background fills take for their CPU work. */
export class FetchAndStore {
  readonly #options: FetchAndStoreOptions;
  /** A background fill's CPU work (validating, hashing, compressing) waits for a turn of its own. */
  readonly #backgroundTurn = createTurnGate();

  constructor(options: FetchAndStoreOptions) {
    this.#options = options;
  }

  async run(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    found: StoreLookup,
    background: boolean,
  ): Promise<Fill> {
    const { store, l1, fetch } = this.#options;
    // While the store cannot be asked, the L1 stands in for it: its copy is what is revalidated,
    // and what is fetched is held there (l1.ts).
    const standingIn = !found.available && l1 !== undefined;
    const lookup = standingIn ? l1.standIn(address.key, address.tag) : found;
    const generation = lookup.generation ?? (await store.ensureGeneration(address));
    if (lookup.generation === undefined && generation !== undefined) l1?.noteGeneration(address.tag, generation);
    const filling: Filling = { address, policy, lookup, standingIn };
    // The entry this fill refreshes: the store's, of the current generation (a purged one is no
    // base to revalidate).
    const current = isCurrent(lookup) ? lookup.entry : undefined;
    const outcome = await fetch(request, validatorsOf(current));
    if (outcome.kind === 'failure') return { kind: 'failure', outcome };
    if (outcome.kind === 'not-modified') {
      // Only a request sent with validators has one (src/upstream/fetch-read.ts): else a bad answer.
      if (current === undefined) return { kind: 'failure', outcome: unaskedNotModified(outcome.notModified.elapsedMs) };
      return this.#notModified(filling, current, outcome.notModified);
    }
    const { answer } = outcome;
    const cacheable = answer.status === 200 || (answer.status === 404 && request.read.kind === 'record');
    if (!cacheable) return { kind: 'private', answer };
    // A background refresh has no client waiting: its CPU work waits for a turn of its own, so
    // that a burst of refreshes never holds the hits queued behind it (src/platform/turn-gate.ts).
    if (background) await this.#backgroundTurn();
    if (current !== undefined && isSameAnswer(current, answer)) return this.#identical(filling, current, answer);
    // Without a generation (store unavailable) the answer is still shared, just not kept.
    const window = this.#windowOf(request, filling.address, answer);
    return this.#storeNew(filling, current, answer, { generation, window }, request.prefetch !== undefined);
  }

  /**
   * A list page's keyset window, checked against its body (page-window.ts); none for a record page
   * or for a page that breaks the keyset rule, which is told so that it is counted and logged.
   */
  #windowOf(request: ReadRequest, address: CacheAddress, answer: OriginAnswer): PageWindow | undefined {
    const after = cursorOf(request.read);
    if (after === undefined || answer.status !== 200) return undefined;
    const window = pageWindowOf(after, answer.page ?? pageParts(answer.body));
    if (window === undefined) this.#options.onWindowless?.(address);
    return window;
  }

  /** A 304: the stored validators are replaced by those it carries, kept otherwise (RFC 9111 §4.3.4). */
  #notModified(filling: Filling, current: CacheEntry, notModified: NotModified): Promise<Fill> {
    const lastModified = notModified.lastModified ?? current.lastModified;
    const validators = { etag: notModified.etag ?? current.upstreamEtag, lastModified };
    return this.#revalidate(filling, current, validators, 'not_modified', notModified.elapsedMs, 0);
  }

  /**
   * The stored response again, byte for byte (an upstream without validators, or one that ignores
   * them): freshened like a 304, with this answer's validators; nothing hashed, compressed or
   * written but the times.
   */
  #identical(filling: Filling, current: CacheEntry, answer: OriginAnswer): Promise<Fill> {
    const validators = { etag: answer.etag, lastModified: answer.lastModified };
    return this.#revalidate(filling, current, validators, 'identical', answer.elapsedMs, answer.body.length);
  }

  /** The stored entry confirmed by the origin: its lifetime, validators and times renewed, then stored. */
  #revalidate(
    filling: Filling,
    current: CacheEntry,
    validators: Validators,
    revalidation: Revalidation,
    upstreamMs: number,
    bytes: number,
  ): Promise<Fill> {
    const { policy, lookup } = filling;
    const unchanged: LifetimeEvidence = { kind: 'unchanged', previous: current };
    const lifetimeMs = this.#lifetime(current.status, policy, unchanged, validators.lastModified);
    const fresher = revalidated(current, policy, this.#options.now(), validators, lookup.mark, lifetimeMs);
    this.#observe(filling.address, revalidation, current, validators.lastModified, bytes);
    return this.#storeRevalidated(filling, current, fresher, revalidation, upstreamMs);
  }

  /** A new answer, stored under the generation (when there is one) and held in the L1. */
  async #storeNew(
    filling: Filling,
    current: CacheEntry | undefined,
    answer: OriginAnswer,
    { generation, window }: { readonly generation: string | undefined; readonly window: PageWindow | undefined },
    ahead: boolean,
  ): Promise<Fill> {
    const { store, l1, now, metrics } = this.#options;
    const { address, policy, lookup } = filling;
    const evidence: LifetimeEvidence =
      current === undefined ? { kind: 'first' } : { kind: 'changed', previous: current };
    const under = {
      generation: generation ?? '',
      mark: lookup.mark,
      lifetimeMs: this.#lifetime(answer.status, policy, evidence, answer.lastModified),
      window,
    };
    const entry = entryFor(answer, policy, under, now(), ahead);
    const storable = generation !== undefined && entry.freshUntil > entry.storedAt;
    // `stored` in Cache-Status means stored (RFC 9211 §2.7): only once the store said so.
    const stored = storable && (await store.save(address, entry));
    if (stored || (storable && filling.standingIn)) l1?.set(address.key, entry, lookup.since);
    if (current !== undefined) metrics?.revalidation('modified');
    const outcome = current === undefined ? 'filled' : 'modified';
    this.#observe(address, outcome, current, answer.lastModified, answer.body.length);
    const revalidation = current === undefined ? undefined : 'modified';
    return { kind: 'entry', entry, stored, upstreamMs: answer.elapsedMs, collapsed: false, revalidation };
  }

  /**
   * A page's own lifetime under a policy with automatic lifetimes, ms (`nextLifetimeMs`,
   * page-lifetime.ts): one shorter than the policy's `ttl` takes a token of the ceiling, when there
   * is one (auto-refresh-budget.ts).
   */
  #lifetime(
    status: number,
    policy: EffectivePolicy,
    evidence: LifetimeEvidence,
    lastModified: string | undefined,
  ): number | undefined {
    const { now, autoBudget } = this.#options;
    return nextLifetimeMs(status, policy, evidence, lastModified, now, () => autoBudget?.take() !== false);
  }

  #observe(
    address: CacheAddress,
    outcome: FillObservation['outcome'],
    previous: CacheEntry | undefined,
    lastModified: string | undefined,
    bytes: number,
  ): void {
    this.#options.onFill?.({ address, outcome, previous, lastModified, bytes, at: this.#options.now() });
  }

  /**
   * The stored entry freshened: in the store when it is still the one this fill read (another
   * fill or freshen that came first is newer, and is left as it is; this request is still served
   * the freshened copy, which the origin has just confirmed); saved whole when it has gone meanwhile
   * (expired or evicted: the body is at hand, and the next request would otherwise fetch it).
   */
  async #storeRevalidated(
    filling: Filling,
    current: CacheEntry,
    fresher: CacheEntry,
    revalidation: Revalidation,
    upstreamMs: number,
  ): Promise<Fill> {
    const { store, l1, metrics } = this.#options;
    const { address } = filling;
    metrics?.revalidation(revalidation);
    let stored = false;
    // A policy of ttl 0 (caching turned off since) keeps nothing, as for every fill.
    const keepable = fresher.freshUntil > fresher.storedAt;
    if (keepable) {
      const result = await store.freshen(address, current, fresher);
      stored = result === 'freshened' || (result === 'missing' && (await store.save(address, fresher)));
    }
    if (stored || (keepable && filling.standingIn)) l1?.set(address.key, fresher, filling.lookup.since);
    return { kind: 'entry', entry: fresher, stored, upstreamMs, collapsed: false, revalidation };
  }
}
