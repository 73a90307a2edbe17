/**
 * The in-process store of the embedded default (one replica): an LRU bounded by bytes, entries
 * expiring at their `keepUntil`, a page that would push others out admitted on its second offer
 * (admission.ts) and only while its company holds no more than its share (company-shares.ts). It
 * keeps decoded entries, so a hit costs no decoding.
 */
import { LRUCache } from 'lru-cache';
import { type CacheAddress, type CacheGroup, groupTag } from '../entry/cache-key.js';
import { type CacheEntry, entryBytes, isRevalidated, sameStoredEntry } from '../entry/entry.js';
import { MarkTable } from '../entry/marks.js';
import { Doorkeeper } from './admission.js';
import { CompanyShares } from './company-shares.js';
import { type CacheStore, newGeneration, type StoreFootprint, type StoreLookup } from './store.js';

/** Bookkeeping bytes per entry beyond its body (key, header fields, LRU node). */
const ENTRY_OVERHEAD = 256;

export interface MemoryStoreOptions {
  readonly maxBytes: number;
  readonly now?: () => number;
}

export function createMemoryStore(options: MemoryStoreOptions): CacheStore {
  if (!Number.isInteger(options.maxBytes) || options.maxBytes < 1024)
    throw new TypeError('cache.memory.maxBytes must be at least 1024');
  const now = options.now ?? Date.now;
  const sizeOf = (entry: CacheEntry, key: string): number => entryBytes(entry) + key.length + ENTRY_OVERHEAD;
  const shares = new CompanyShares();
  const entries = new LRUCache<string, CacheEntry>({
    maxSize: options.maxBytes,
    sizeCalculation: sizeOf,
    onInsert: (entry, key) => shares.held(key, sizeOf(entry, key)),
    dispose: (entry, key) => shares.held(key, -sizeOf(entry, key)),
  });
  const generations = new Map<string, string>();
  const marks = new MarkTable(now);
  const doorkeeper = new Doorkeeper();

  function peek(address: CacheAddress): StoreLookup {
    let entry = entries.get(address.key);
    if (entry !== undefined && entry.keepUntil <= now()) {
      entries.delete(address.key);
      entry = undefined;
    }
    const mark = marks.pageMark(address.markKeys);
    return { entry, generation: generations.get(address.tag), available: true, ...(mark !== '' && { mark }) };
  }

  return {
    kind: 'memory',
    peek,
    lookup: (address) => Promise.resolve(peek(address)),
    ensureGeneration(address) {
      const tag = address.tag;
      let generation = generations.get(tag);
      if (generation === undefined) {
        generation = newGeneration();
        generations.set(tag, generation);
      }
      return Promise.resolve(generation);
    },
    save(address, entry) {
      const ttl = entry.keepUntil - now();
      const size = sizeOf(entry, address.key);
      const fits = size <= options.maxBytes;
      // A page that would push others out enters on its second offer (admission.ts), and only
      // while its company holds no more than its share (company-shares.ts).
      const admitted =
        entries.has(address.key) ||
        entries.calculatedSize + size <= options.maxBytes ||
        (!shares.overShare(address.key, options.maxBytes) && doorkeeper.admit(address.key));
      const kept = ttl > 0 && fits && admitted;
      if (kept) entries.set(address.key, entry);
      return Promise.resolve(kept);
    },
    freshen(address, stored, fresher) {
      const current = peek(address).entry;
      if (current === undefined) return Promise.resolve('missing');
      if (!sameStoredEntry(current, stored) || !isRevalidated(stored, fresher) || fresher.keepUntil <= now())
        return Promise.resolve('changed');
      // A freshening carries the stored entry's own body Buffers: nothing of the body is copied.
      entries.set(address.key, fresher);
      return Promise.resolve('freshened');
    },
    takeAhead(address) {
      const current = peek(address).entry;
      if (current?.ahead !== true) return Promise.resolve(false);
      // The same response and body Buffers: only the flag changes.
      entries.set(address.key, { ...current, ahead: undefined });
      return Promise.resolve(true);
    },
    invalidate({ keys, mark, records, keepMs }) {
      marks.set(keys.lists, mark);
      if (records === undefined) marks.set(keys.all, mark);
      else for (const id of records) marks.set(keys.record(id), mark, keepMs);
      marks.prune();
      return Promise.resolve(true);
    },
    purge(group: CacheGroup) {
      const generation = newGeneration();
      generations.set(groupTag(group), generation);
      return Promise.resolve(generation);
    },
    footprint(): StoreFootprint {
      return { entries: entries.size, bytes: entries.calculatedSize };
    },
    bytesByCompany: () => shares.byCompany(),
    close() {
      entries.clear();
      return Promise.resolve();
    },
  };
}
