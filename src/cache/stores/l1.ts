/**
 * The L1 (docs/cache.md#the-l1): an in-process store of the hottest decoded entries in front of
 * Redis, bounded by bytes. While the change channel vouches for it (every purge and invalidation
 * of the fleet heard, none missed: src/cache/read/change-channel.ts), a copy serves for as long as
 * its page is fresh, without asking Redis; otherwise each copy serves for a short time (1 s by
 * default) and is confirmed against Redis before that runs out. It never serves across a purge it
 * has seen: a copy is used only while its generation is the group's generation last seen in Redis
 * (every lookup refreshes that) or announced by a purge; and after a gap in the channel, no copy
 * set before it serves until it is confirmed.
 *
 * While Redis cannot be asked, the L1 is this replica's cache (docs/cache.md#when-redis-fails): a
 * copy whose confirmation found Redis unavailable serves on for another lifetime (a purge or a newer
 * entry could not reach this replica then anyway), the last copy of a page stands in for the store's
 * (`standIn`), and what a fill fetches meanwhile is held here under the group's generation as last
 * seen, so that an outage sends no cached page to the upstream.
 */

import { RecentMap } from '../../platform/recent-map.js';
import { type CacheEntry, entryBytes } from '../entry/entry.js';
import { changedByMark } from '../entry/marks.js';
import { type ChangedIds, reaches } from '../entry/page-window.js';
import { keyFraction } from '../read/refresh-ahead.js';
import { Doorkeeper } from './admission.js';
import { CompanyShares } from './company-shares.js';
import { lookupOfCopy, newGeneration, type StoreLookup } from './store.js';

export interface L1Options {
  readonly maxBytes: number;
  readonly ttlMs: number;
  /** The clock of the copies' lifetimes, in milliseconds (default: `performance`; tests give their own). */
  readonly clock?: { now(): number };
}

const ENTRY_OVERHEAD = 256;
/**
 * A copy is confirmed against the store (`dueForReread`) at a point of its key's own between half
 * and a fifth of its L1 lifetime before it would expire: early enough that the read is back long
 * before, spread so that copies set together are not all read again together.
 */
const REREAD_FROM = 0.5;
const REREAD_BY = 0.2;

/** A copy held, with the two instants of its L1 lifetime, fixed when it is set. */
interface HeldCopy {
  readonly entry: CacheEntry;
  /** When the copy is no longer served from here. */
  readonly expiresAt: number;
  /** From when `dueForReread` says yes: a point of the key's own (`REREAD_FROM`, `REREAD_BY`). */
  readonly rereadAt: number;
  /** The L1's count of sets when this copy was set: copies set before an invalidation are older. */
  readonly setNumber: number;
  /** Another fill of the page was announced since: the copy is confirmed at its next hit. */
  readonly superseded?: boolean;
}

/**
 * An invalidation announced for a group: copies set before it whose page it can change (all, but
 * a list page whose keyset window holds none of its records: page-window.ts) are not served from here.
 */
interface GroupMark {
  readonly setNumber: number;
  /** As the group's lists key holds it: the mark, and the records it names. */
  readonly mark: string;
  readonly changed: ChangedIds | undefined;
}

/** The invalidations of a group remembered here: the last `MARKS_KEPT`, and what came before them. */
interface GroupMarks {
  /** Newest last. */
  readonly recent: GroupMark[];
  /** The set number of the newest mark no longer in `recent`: a copy set before it is marked. */
  floor: number;
}

/** Invalidations remembered per group, at most; a copy older than all of them is marked. */
const MARKS_KEPT = 16;

export class L1Cache {
  /**
   * Bounded by bytes, what was not used for a generation going first (src/platform/recent-map.ts);
   * the lifetimes are kept beside each copy and checked here with one clock read (lru-cache's own
   * TTL bookkeeping costs a hit two lookups and its clock's upkeep).
   */
  readonly #entries: RecentMap<string, HeldCopy>;
  /** Group tag → the generation last seen for it. */
  readonly #generations = new Map<string, string>();
  /** Group tag → the last invalidation announced for it (docs/cache.md#soft-invalidation). */
  readonly #marks = new Map<string, GroupMarks>();
  /** Copies set so far: the order of sets, invalidations and the change channel's gaps. */
  #sets = 0;
  /** Whether the change channel vouches for the copies set since `#vouchedFrom`. */
  #told = false;
  /** The count of sets at the channel's last gap: copies set before it serve only once confirmed. */
  #vouchedFrom = 0;
  /**
   * When the channel last lost its verdict, plus half a lifetime: until then a copy it vouched for
   * serves as if confirmed then (`#expiry`).
   */
  #vouchedUntil = 0;
  readonly #ttlMs: number;
  readonly #clock: { now(): number };
  readonly #doorkeeper = new Doorkeeper();
  readonly #shares = new CompanyShares();
  readonly #maxBytes: number;

  constructor(options: L1Options) {
    if (!Number.isInteger(options.maxBytes) || options.maxBytes < 1024)
      throw new TypeError('cache.l1.maxBytes must be at least 1024');
    if (!(options.ttlMs > 0)) throw new TypeError('cache.l1.ttl must be positive');
    this.#ttlMs = options.ttlMs;
    this.#clock = options.clock ?? performance;
    this.#maxBytes = options.maxBytes;
    this.#entries = new RecentMap({
      maxSize: options.maxBytes,
      sizeOf: (held, key) => this.#sizeOf(held.entry, key),
      onHeld: (key, size) => this.#shares.held(key, size),
    });
  }

  /**
   * The copy under `key` of the group's generation, vouched for by the change channel (its page's
   * freshness is the caller's to judge) or else within its L1 lifetime. A copy set before the
   * channel's last gap is not served until it is confirmed; a copy past its lifetime stays held
   * (bounded by bytes, like every copy) for `standIn`.
   */
  get(key: string, tag: string): CacheEntry | undefined {
    const held = this.#entries.get(key);
    if (held === undefined || held.setNumber < this.#vouchedFrom) return undefined;
    if (!this.#told && this.#clock.now() >= this.#expiry(held)) return undefined;
    return this.#generations.get(tag) === held.entry.generation && !this.#markedSince(held, tag)
      ? held.entry
      : undefined;
  }

  /**
   * The change channel's verdict (src/cache/read/change-channel.ts): `true` while it has heard every
   * change announced since its last gap, so that copies set since serve for as long as their pages
   * are fresh; `false` while it cannot say, so that copies serve for their L1 lifetime and are
   * confirmed before it runs out.
   */
  tell(told: boolean): void {
    // What the channel vouched for was checked up to two heartbeats (half a lifetime) before now.
    if (this.#told && !told) this.#vouchedUntil = this.#clock.now() + this.#ttlMs / 2;
    this.#told = told;
  }

  /**
   * When a copy's L1 lifetime runs out while the channel has no verdict: a copy it vouched for (set
   * since its last gap) counts as confirmed when the verdict was lost, so that the copies of hot
   * pages do not all lapse at once and wait for Redis; it is confirmed before then like every other copy.
   */
  #expiry(held: HeldCopy): number {
    return held.setNumber >= this.#vouchedFrom ? Math.max(held.expiresAt, this.#vouchedUntil) : held.expiresAt;
  }

  /**
   * A gap in the change channel (a change it may have missed): no copy set before now serves until
   * it is confirmed against the store (set again from a read that began after this).
   */
  distrust(): void {
    this.#vouchedFrom = ++this.#sets;
  }

  /** Whether an invalidation of the group that can change the copy's page was announced after it was set. */
  #markedSince(held: HeldCopy, tag: string): boolean {
    return this.#marks.size !== 0 && this.#markAfter(held, tag) !== undefined;
  }

  /**
   * The first invalidation of the group announced after the copy was set that can change its page
   * (its mark as the lists key holds it; the newest known when earlier ones are forgotten).
   */
  #markAfter(held: HeldCopy, tag: string): string | undefined {
    const marks = this.#marks.get(tag);
    if (marks === undefined) return undefined;
    if (held.setNumber < marks.floor) return marks.recent.at(-1)?.mark;
    for (const mark of marks.recent)
      if (mark.setNumber > held.setNumber && reaches(held.entry.window, mark.changed)) return mark.mark;
    return undefined;
  }

  /**
   * What this replica holds of a page while the store cannot be asked, in the form of a store's
   * answer (`available: false`): the last copy of the group's generation, whatever its L1 lifetime
   * (the policy's freshness and stale windows decide what it may serve), and that generation; a
   * provisional one when none was seen, so that what a fill fetches meanwhile can be held, and is
   * dropped once the store names the group's own.
   */
  standIn(key: string, tag: string): StoreLookup {
    let generation = this.#generations.get(tag);
    if (generation === undefined) {
      generation = `provisional.${newGeneration()}`;
      this.#generations.set(tag, generation);
    }
    const entry = this.latest(key, tag);
    const held = this.#entries.get(key);
    // A copy set before an invalidation is stale from its mark on, as the store would say.
    const marked = held === undefined ? undefined : this.#markAfter(held, tag);
    const mark = marked ?? entry?.mark;
    return { entry, generation, available: false, ...(mark !== undefined && { mark }) };
  }

  /**
   * The copy under `key` (as `get` would serve it) in the form of the store's answer it came from:
   * what a refresh led from the L1 starts from (it reads the store itself once it holds the lease).
   */
  held(key: string, tag: string): StoreLookup | undefined {
    const entry = this.get(key, tag);
    return entry === undefined ? undefined : lookupOfCopy(entry);
  }

  /** The last copy under `key` of the group's generation, whatever its L1 lifetime. */
  latest(key: string, tag: string): CacheEntry | undefined {
    const entry = this.#entries.get(key)?.entry;
    return entry !== undefined && this.#generations.get(tag) === entry.generation ? entry : undefined;
  }

  /**
   * The copy under `key` of the group's generation whose L1 lifetime ran out no more than one
   * lifetime ago: what may serve while the store is being read for it (a command timeout at most),
   * no older than a copy served and confirmed every lifetime would be.
   */
  lapsed(key: string, tag: string): CacheEntry | undefined {
    const held = this.#entries.get(key);
    if (held === undefined || held.setNumber < this.#vouchedFrom) return undefined;
    if (this.#clock.now() >= this.#expiry(held) + this.#ttlMs) return undefined;
    if (this.#markedSince(held, tag)) return undefined;
    return this.#generations.get(tag) === held.entry.generation ? held.entry : undefined;
  }

  /** A copy whose confirmation found the store unavailable serves on for another L1 lifetime. */
  renew(key: string): void {
    const held = this.#entries.get(key);
    // Renewed as it was set: a copy set before an invalidation stays older than it.
    if (held !== undefined) this.#hold(key, held.entry, held.setNumber);
  }

  /**
   * The copy under `key` when it is near the end of its L1 lifetime and the change channel does not
   * vouch for it (else `undefined`): the read service then confirms it against the store in the
   * background and sets it again, so that a page in steady demand never drops out of the L1 and none
   * of its hits waits for Redis (copies set together would expire together, and each of their
   * requests then read and decode the page).
   */
  dueForReread(key: string): CacheEntry | undefined {
    const held = this.#entries.get(key);
    if (held === undefined) return undefined;
    if (held.superseded === true) return held.entry;
    // A copy the channel vouches for needs no other confirmation: it hears of what would change it.
    if (this.#told && held.setNumber >= this.#vouchedFrom) return undefined;
    const at = this.#clock.now();
    const expiry = this.#expiry(held);
    // The key's own point before its expiry: as far before it as when the copy was set.
    return at >= expiry - (held.expiresAt - held.rereadAt) && at < expiry ? held.entry : undefined;
  }

  /**
   * Another replica's fill of the page under `key` was announced: the store holds a newer entry (a
   * refresh, a freshen) than the copy, still fresh, held here. The copy serves on, and its next hit
   * has it confirmed in the background (`dueForReread`), so that the newer entry is taken before
   * the copy's freshness runs out and no hit of the page then waits for Redis.
   */
  supersede(key: string): void {
    const held = this.#entries.get(key);
    if (held !== undefined && held.superseded !== true) this.#entries.set(key, { ...held, superseded: true });
  }

  /**
   * Holds `entry` under `key` for an L1 lifetime (`since`: the `sequence` when the read that gave it began). A key not held yet whose copy would push others
   * out is admitted only on its second offer (admission.ts) and while its company holds no more
   * than its share (company-shares.ts): a crawl does not evict the hot pages.
   */
  set(key: string, entry: CacheEntry, since?: number): void {
    if (!this.#entries.has(key) && !this.#admits(key, this.#sizeOf(entry, key))) return;
    this.#hold(key, entry, since ?? ++this.#sets);
  }

  /**
   * The count of sets and invalidations so far. What was read from the store after this count was
   * taken is set with it (`set`'s `since`): a copy of a read that began before an invalidation is
   * then older than it, however late the read came back.
   */
  sequence(): number {
    return this.#sets;
  }

  #hold(key: string, entry: CacheEntry, setNumber: number): void {
    const at = this.#clock.now();
    const ttl = this.#ttlMs;
    // Read again with between REREAD_FROM and REREAD_BY of the lifetime left, where the key says.
    const rereadLeft = ttl * (REREAD_BY + (REREAD_FROM - REREAD_BY) * keyFraction(key));
    this.#entries.set(key, { entry, expiresAt: at + ttl, rereadAt: at + ttl - rereadLeft, setNumber });
  }

  #admits(key: string, size: number): boolean {
    if (!this.#entries.wouldEvict(size)) return true;
    return !this.#shares.overShare(key, this.#maxBytes) && this.#doorkeeper.admit(key);
  }

  #sizeOf(entry: CacheEntry, key: string): number {
    return entryBytes(entry) + key.length + ENTRY_OVERHEAD;
  }

  /** Records the group's generation as read from the store (or `undefined`: none is valid). */
  noteGeneration(tag: string, generation: string | undefined): void {
    if (generation === undefined) this.#generations.delete(tag);
    else if (this.#generations.get(tag) !== generation) this.#generations.set(tag, generation);
  }

  /**
   * An invalidation (docs/cache.md#soft-invalidation): no copy of the group set before it is served
   * from here, but a list page's whose keyset window holds none of the records `mark` names
   * (docs/cache.md#window-marks); the store says which of its pages are stale. A copy standing in
   * for the store is stale from `mark` on.
   */
  markGroup(tag: string, mark: string): void {
    const marks = this.#marks.get(tag) ?? { recent: [], floor: 0 };
    marks.recent.push({ setNumber: ++this.#sets, mark, changed: changedByMark(mark) });
    const forgotten = marks.recent.length > MARKS_KEPT ? marks.recent.shift() : undefined;
    if (forgotten !== undefined) marks.floor = forgotten.setNumber;
    this.#marks.set(tag, marks);
  }

  /** A purge: nothing of the group is served from here until the store is read again. */
  forgetGroup(tag: string): void {
    this.#generations.delete(tag);
  }

  /** Entries and bytes held (as counted against `maxBytes`), for the metrics. */
  footprint(): { readonly entries: number; readonly bytes: number } {
    return { entries: this.#entries.size, bytes: this.#entries.totalSize };
  }

  /** Bytes held by each company holding any (as counted against `maxBytes`). */
  bytesByCompany(): ReadonlyMap<string, number> {
    return this.#shares.byCompany();
  }
}
