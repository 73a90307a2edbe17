/**
 * The in-process store of the embedded default (one replica): an LRU bounded by bytes, entries
 * expiring at their `keepUntil`. It keeps decoded entries, so a hit costs no decoding.
 */
import { LRUCache } from 'lru-cache';
import { type CacheAddress, type CacheGroup, groupTag } from './cache-key.js';
import { type CacheEntry, entryBytes, isFreshening, sameStoredEntry } from './entry.js';
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
  const entries = new LRUCache<string, CacheEntry>({
    maxSize: options.maxBytes,
    sizeCalculation: (entry, key) => entryBytes(entry) + key.length + ENTRY_OVERHEAD,
  });
  const generations = new Map<string, string>();

  function peek(address: CacheAddress): StoreLookup {
    let entry = entries.get(address.key);
    if (entry !== undefined && entry.keepUntil <= now()) {
      entries.delete(address.key);
      entry = undefined;
    }
    return { entry, generation: generations.get(address.tag), available: true };
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
      const fits = entryBytes(entry) + address.key.length + ENTRY_OVERHEAD <= options.maxBytes;
      if (ttl > 0 && fits) entries.set(address.key, entry);
      return Promise.resolve(ttl > 0 && fits);
    },
    freshen(address, stored, fresher) {
      const current = peek(address).entry;
      if (current === undefined) return Promise.resolve('missing');
      if (!sameStoredEntry(current, stored) || !isFreshening(stored, fresher) || fresher.keepUntil <= now())
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
    purge(group: CacheGroup) {
      const generation = newGeneration();
      generations.set(groupTag(group), generation);
      return Promise.resolve(generation);
    },
    footprint(): StoreFootprint {
      return { entries: entries.size, bytes: entries.calculatedSize };
    },
    close() {
      entries.clear();
      return Promise.resolve();
    },
  };
}
