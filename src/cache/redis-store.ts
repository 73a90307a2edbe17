/**
 * The Redis store (docs/cache.md). A lookup is one MGET of the group's generation and the entry (one
 * hash slot, one round trip, auto-pipelined); a save is one SET with PX until `keepUntil`; a freshen
 * is one script on the entry's key alone (FRESHEN_SCRIPT); a purge is one SET of a new generation.
 * Every failure is a miss or a skipped write, never an error.
 */
import { createHash } from 'node:crypto';
import type { RedisClient, RedisHealth } from '../platform/redis.js';
import type { CacheAddress, CacheGroup } from './cache-key.js';
import { generationKey } from './cache-key.js';
import { type CacheEntry, decodeEntry, encodeEntry, freshening, isFreshening } from './entry.js';
import { type CacheStore, type FreshenResult, newGeneration, type StoreLookup } from './store.js';

const UNAVAILABLE: StoreLookup = { entry: undefined, generation: undefined, available: false };

/**
 * A freshen (RFC 9111 §4.3.4: the stored response updated, its body kept; docs/cache.md#revalidation),
 * on one key, so one hash slot of a cluster. ARGV[1] is the stored prefix (preamble and header) of
 * the entry the caller read; if the value still starts with it, ARGV[2] is written at offset
 * ARGV[3] (the 24-byte freshness block at 2 when the header is unchanged, the whole prefix at 0
 * when it keeps its length), or, with ARGV[3] = -1, the value becomes ARGV[2] followed by the
 * body already there (a header of another length: the body moves inside Redis, never over the
 * wire); then the key expires in ARGV[4] ms. 1: freshened; 0: the value is another (a fill or a
 * freshen came first): nothing written; -1: no such key.
 */
const FRESHEN_SCRIPT = `if redis.call('exists', KEYS[1]) == 0 then return -1 end
local expected = ARGV[1]
if redis.call('getrange', KEYS[1], 0, string.len(expected) - 1) ~= expected then return 0 end
local offset = tonumber(ARGV[3])
if offset >= 0 then
  redis.call('setrange', KEYS[1], offset, ARGV[2])
else
  redis.call('set', KEYS[1], ARGV[2] .. redis.call('getrange', KEYS[1], string.len(expected), -1))
end
redis.call('pexpire', KEYS[1], ARGV[4])
return 1`;

const FRESHEN_RESULTS: Readonly<Record<string, FreshenResult>> = { '1': 'freshened', '0': 'changed', '-1': 'missing' };
/**
 * The script is sent by its SHA1 (EVALSHA): its text is longer than what a freshen carries, and
 * saving bytes is the point. A node that does not have it (a new node, a restart, a failover)
 * answers NOSCRIPT once, and the text goes with that call (EVAL), which caches it there.
 */
const FRESHEN_SHA = createHash('sha1').update(FRESHEN_SCRIPT).digest('hex');

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

export interface RedisStoreOptions {
  readonly client: RedisClient;
  readonly health: RedisHealth;
  readonly prefix: string;
  readonly now?: () => number;
  /** Called with each failure, for the logs and metrics. */
  readonly onFailure?: (operation: string, error: unknown) => void;
}

export function createRedisStore(options: RedisStoreOptions): CacheStore {
  return new RedisStore(options);
}

class RedisStore implements CacheStore {
  readonly kind = 'redis';
  readonly #client: RedisClient;
  readonly #health: RedisHealth;
  readonly #prefix: string;
  readonly #now: () => number;
  readonly #onFailure: ((operation: string, error: unknown) => void) | undefined;

  constructor(options: RedisStoreOptions) {
    this.#client = options.client;
    this.#health = options.health;
    this.#prefix = options.prefix;
    this.#now = options.now ?? Date.now;
    this.#onFailure = options.onFailure;
  }

  #failed(operation: string, key: string, error: unknown): void {
    this.#health.failed(key, error);
    this.#onFailure?.(operation, error);
  }

  async lookup(address: CacheAddress): Promise<StoreLookup> {
    if (!this.#health.usable(address.key)) return UNAVAILABLE;
    try {
      const [generation, raw] = await this.#client.mgetBuffer(address.generationKey, address.key);
      return {
        entry: raw === null || raw === undefined ? undefined : decodeEntry(raw),
        generation: generation === null || generation === undefined ? undefined : generation.toString('utf8'),
        available: true,
      };
    } catch (error) {
      this.#failed('lookup', address.key, error);
      return UNAVAILABLE;
    }
  }

  async ensureGeneration(address: CacheAddress): Promise<string | undefined> {
    if (!this.#health.usable(address.generationKey)) return undefined;
    const candidate = newGeneration();
    try {
      // SET … NX GET (Redis ≥ 7): the existing generation, or ours when there was none.
      const existing = await this.#client.set(address.generationKey, candidate, 'NX', 'GET');
      return existing ?? candidate;
    } catch (error) {
      this.#failed('generation', address.generationKey, error);
      return undefined;
    }
  }

  async save(address: CacheAddress, entry: CacheEntry): Promise<boolean> {
    const ttl = Math.ceil(entry.keepUntil - this.#now());
    if (ttl <= 0 || !this.#health.usable(address.key)) return false;
    try {
      await this.#client.set(address.key, encodeEntry(entry), 'PX', ttl);
      return true;
    } catch (error) {
      this.#failed('save', address.key, error);
      return false;
    }
  }

  async freshen(address: CacheAddress, stored: CacheEntry, fresher: CacheEntry): Promise<FreshenResult> {
    // Relative, as for a save: the proxy's clock and Redis's need not agree.
    const ttl = Math.ceil(fresher.keepUntil - this.#now());
    if (ttl <= 0 || !isFreshening(stored, fresher)) return 'changed';
    if (!this.#health.usable(address.key)) return 'unavailable';
    const { expected, bytes, offset } = freshening(stored, fresher);
    const args = [address.key, expected, bytes, offset ?? -1, ttl] as const;
    try {
      const reply = await this.#client
        .evalsha(FRESHEN_SHA, 1, ...args)
        .catch((error: unknown) =>
          isNoScript(error) ? this.#client.eval(FRESHEN_SCRIPT, 1, ...args) : Promise.reject(error),
        );
      return FRESHEN_RESULTS[String(reply)] ?? 'unavailable';
    } catch (error) {
      this.#failed('freshen', address.key, error);
      return 'unavailable';
    }
  }

  async purge(group: CacheGroup): Promise<string | undefined> {
    const generation = newGeneration();
    const key = generationKey(this.#prefix, group);
    try {
      await this.#client.set(key, generation);
      return generation;
    } catch (error) {
      this.#failed('purge', key, error);
      return undefined;
    }
  }

  close(): Promise<void> {
    return Promise.resolve(); // the connection belongs to the app, which closes it
  }
}
