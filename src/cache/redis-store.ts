/**
 * The Redis store (docs/cache.md). A lookup is one MGET of the group's generation and the entry (one
 * hash slot, one round trip, auto-pipelined); a save is one SET with PX until `keepUntil`; a purge
 * is one SET of a new generation. Every failure is a miss or a skipped save, never an error.
 */
import type { CacheGroup } from './cache-key.js';
import { generationKey } from './cache-key.js';
import { decodeEntry, encodeEntry } from './entry.js';
import type { RedisClient, RedisHealth } from '../platform/redis.js';
import { type CacheStore, type StoreLookup, newGeneration } from './store.js';

const UNAVAILABLE: StoreLookup = { entry: undefined, generation: undefined, available: false };

export interface RedisStoreOptions {
  readonly client: RedisClient;
  readonly health: RedisHealth;
  readonly prefix: string;
  readonly now?: () => number;
  /** Called with each failure, for the logs and metrics. */
  readonly onFailure?: (operation: string, error: unknown) => void;
}

export function createRedisStore(options: RedisStoreOptions): CacheStore {
  const { client, health, prefix } = options;
  const now = options.now ?? Date.now;

  function failed(operation: string, key: string, error: unknown): void {
    health.failed(key, error);
    options.onFailure?.(operation, error);
  }

  return {
    kind: 'redis',
    async lookup(address) {
      if (!health.usable(address.key)) return UNAVAILABLE;
      try {
        const [generation, raw] = await client.mgetBuffer(address.generationKey, address.key);
        return {
          entry: raw === null || raw === undefined ? undefined : decodeEntry(raw),
          generation: generation === null || generation === undefined ? undefined : generation.toString('utf8'),
          available: true,
        };
      } catch (error) {
        failed('lookup', address.key, error);
        return UNAVAILABLE;
      }
    },
    async ensureGeneration(address) {
      if (!health.usable(address.generationKey)) return undefined;
      const candidate = newGeneration();
      try {
        // SET … NX GET (Redis ≥ 7): the existing generation, or ours when there was none.
        const existing = await client.set(address.generationKey, candidate, 'NX', 'GET');
        return existing ?? candidate;
      } catch (error) {
        failed('generation', address.generationKey, error);
        return undefined;
      }
    },
    async save(address, entry) {
      const ttl = Math.ceil(entry.keepUntil - now());
      if (ttl <= 0 || !health.usable(address.key)) return false;
      try {
        await client.set(address.key, encodeEntry(entry), 'PX', ttl);
        return true;
      } catch (error) {
        failed('save', address.key, error);
        return false;
      }
    },
    async purge(group: CacheGroup) {
      const generation = newGeneration();
      const key = generationKey(prefix, group);
      try {
        await client.set(key, generation);
        return generation;
      } catch (error) {
        failed('purge', key, error);
        return undefined;
      }
    },
    close() {
      return Promise.resolve(); // the connection belongs to the app, which closes it
    },
  };
}
