/**
 * The in-process store of the embedded default (one replica): an LRU bounded by bytes, entries
 * expiring at their `keepUntil`, a page that would push others out admitted on its second offer
 * (admission.ts) and only while its company holds no more than its share (company-shares.ts). It
 * keeps decoded entries, so a hit costs no decoding.
 */
import { LRUCache } from 'lru-cache';
import { type CacheAddress, type CacheGroup, groupTag } from '../entry/cache-key.js';
import { type CacheEntry, entryBytes, isRevalidated, sameStoredEntry } from '../entry/entry.js';
import { LIST_HISTORY, MarkTable } from '../entry/marks.js';
import { Doorkeeper } from './admission.js';
import { CompanyShares } from './company-shares.js';
import {
  type CacheStore,
  type FreshenResult,
  type Invalidation,
  newGeneration,
  type StoreFootprint,
  type StoreLookup,
} from './store.js';

/** Bookkeeping bytes per entry beyond its body (key, header fields, LRU node). */
const ENTRY_OVERHEAD = 256;

/** The bytes an entry holds under its key, as the LRU counts them against `maxBytes`. */
function sizeOf(entry: CacheEntry, key: string): number {
  return entryBytes(entry) + key.length + ENTRY_OVERHEAD;
}

export interface MemoryStoreOptions {
  readonly maxBytes: number;
  readonly now?: () => number;
}

export function createMemoryStore(options: MemoryStoreOptions): CacheStore {
  return new MemoryStore(options);
}

class MemoryStore implements CacheStore {
  readonly kind = 'memory';
  readonly #maxBytes: number;
  readonly #now: () => number;
  readonly #shares = new CompanyShares();
  readonly #entries: LRUCache<string, CacheEntry>;
  /** Each group's generation, by its tag. */
  readonly #generations = new Map<string, string>();
  readonly #marks: MarkTable;
  readonly #doorkeeper = new Doorkeeper();

  constructor(options: MemoryStoreOptions) {
    if (!Number.isInteger(options.maxBytes) || options.maxBytes < 1024)
      throw new TypeError('cache.memory.maxBytes must be at least 1024');
    this.#maxBytes = options.maxBytes;
    this.#now = options.now ?? Date.now;
    this.#marks = new MarkTable(this.#now);
    const shares = this.#shares;
    this.#entries = new LRUCache<string, CacheEntry>({
      maxSize: options.maxBytes,
      sizeCalculation: sizeOf,
      onInsert: (entry, key) => shares.held(key, sizeOf(entry, key)),
      dispose: (entry, key) => shares.held(key, -sizeOf(entry, key)),
    });
  }

  peek(address: CacheAddress): StoreLookup {
    let entry = this.#entries.get(address.key);
    if (entry !== undefined && entry.keepUntil <= this.#now()) {
      this.#entries.delete(address.key);
      entry = undefined;
    }
    const mark = this.#marks.pageMark(address.markKeys);
    return { entry, generation: this.#generations.get(address.tag), available: true, ...(mark !== '' && { mark }) };
  }

  lookup(address: CacheAddress): Promise<StoreLookup> {
    return Promise.resolve(this.peek(address));
  }

  ensureGeneration(address: CacheAddress): Promise<string> {
    let generation = this.#generations.get(address.tag);
    if (generation === undefined) {
      generation = newGeneration();
      this.#generations.set(address.tag, generation);
    }
    return Promise.resolve(generation);
  }

  save(address: CacheAddress, entry: CacheEntry): Promise<boolean> {
    const entries = this.#entries;
    const ttl = entry.keepUntil - this.#now();
    const size = sizeOf(entry, address.key);
    const fits = size <= this.#maxBytes;
    // A page that would push others out enters on its second offer (admission.ts), and only
    // while its company holds no more than its share (company-shares.ts).
    const admitted =
      entries.has(address.key) ||
      entries.calculatedSize + size <= this.#maxBytes ||
      (!this.#shares.overShare(address.key, this.#maxBytes) && this.#doorkeeper.admit(address.key));
    const kept = ttl > 0 && fits && admitted;
    if (kept) entries.set(address.key, entry);
    return Promise.resolve(kept);
  }

  freshen(address: CacheAddress, stored: CacheEntry, fresher: CacheEntry): Promise<FreshenResult> {
    const current = this.peek(address).entry;
    if (current === undefined) return Promise.resolve('missing');
    if (!sameStoredEntry(current, stored) || !isRevalidated(stored, fresher) || fresher.keepUntil <= this.#now())
      return Promise.resolve('changed');
    // A freshening carries the stored entry's own body Buffers: nothing of the body is copied.
    this.#entries.set(address.key, fresher);
    return Promise.resolve('freshened');
  }

  takeAhead(address: CacheAddress): Promise<boolean> {
    const current = this.peek(address).entry;
    if (current?.ahead !== true) return Promise.resolve(false);
    // The same response and body Buffers: only the flag changes.
    this.#entries.set(address.key, { ...current, ahead: undefined });
    return Promise.resolve(true);
  }

  invalidate({ keys, mark, listsMark, records, keepMs }: Invalidation): Promise<boolean> {
    const marks = this.#marks;
    marks.set(keys.lists, listsMark, Number.POSITIVE_INFINITY, LIST_HISTORY);
    if (records === undefined) marks.set(keys.all, mark);
    else for (const id of records) marks.set(keys.record(id), mark, keepMs);
    marks.prune();
    return Promise.resolve(true);
  }

  purge(group: CacheGroup): Promise<string> {
    const generation = newGeneration();
    this.#generations.set(groupTag(group), generation);
    return Promise.resolve(generation);
  }

  footprint(): StoreFootprint {
    return { entries: this.#entries.size, bytes: this.#entries.calculatedSize };
  }

  bytesByCompany(): ReadonlyMap<string, number> {
    return this.#shares.byCompany();
  }

  close(): Promise<void> {
    this.#entries.clear();
    return Promise.resolve();
  }
}
