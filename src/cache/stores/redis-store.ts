/**
 * The Redis store (docs/cache.md). A lookup is one MGET of the group's generation, the entry and the
 * page's invalidation marks (one hash slot, one round trip, auto-pipelined), or, given the copy the caller holds, a GET of the
 * generation and a GETRANGE of the stored prefix, and the MGET only if the prefix is not the copy's; a save is one SET with PX until `keepUntil`; a freshen
 * is one script on the entry's key alone (FRESHEN_SCRIPT); a purge is one SET of a new generation;
 * an invalidation one transaction of marks.
 * Every failure is a miss or a skipped write, never an error.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../../platform/redis/connection.js';
import type { RedisHealth } from '../../platform/redis/health.js';
import type { CacheAddress, CacheGroup } from '../entry/cache-key.js';
import { generationKey } from '../entry/cache-key.js';
import {
  type CacheEntry,
  decodeEntry,
  ENTRY_FORMAT_VERSION,
  encodeEntry,
  FLAG_AHEAD,
  FLAGS_OFFSET,
  isRevalidated,
  revalidationPatch,
  storedPrefix,
} from '../entry/entry.js';
import { HISTORY, LIST_HISTORY, pageMark } from '../entry/marks.js';
import { type CacheStore, type FreshenResult, type Invalidation, newGeneration, type StoreLookup } from './store.js';

const UNAVAILABLE: StoreLookup = { entry: undefined, generation: undefined, available: false };

function textOf(stored: Buffer | null | undefined): string | undefined {
  return stored === null || stored === undefined ? undefined : stored.toString('utf8');
}

/** A lookup's answer: the entry, the group's generation and the page's marks, as read. */
function found(
  entry: CacheEntry | undefined,
  generation: Buffer | null | undefined,
  marks: ReadonlyArray<Buffer | null | undefined>,
): StoreLookup {
  const mark = pageMark(marks.map(textOf));
  return { entry, generation: textOf(generation), available: true, ...(mark !== '' && { mark }) };
}

/**
 * A freshen (RFC 9111 §4.3.4: the stored response updated, its body kept; docs/cache.md#revalidation),
 * on one key, so one hash slot of a cluster. ARGV[1] is the stored prefix (preamble and header) of
 * the entry the caller read; if the value still starts with it, ARGV[2] is written at offset
 * ARGV[3] (the 24-byte freshness block at 2 when the header is unchanged, the whole prefix at 0
 * when it keeps its length), or, with ARGV[3] = -1, the value becomes ARGV[2] followed by the
 * body already there (a header of another length: the body moves inside Redis, never over the
 * wire); then the key expires in ARGV[4] ms. 1: freshened; 0: the value is another (a fill or a
 * freshen came first): nothing written; -1: no such key. The flag of a page fetched ahead is
 * masked out of the comparison (ARGV[1] comes without it): a request that took the page since
 * changed nothing of the response.
 */
const FRESHEN_SCRIPT = `if redis.call('exists', KEYS[1]) == 0 then return -1 end
local expected = ARGV[1]
local stored = redis.call('getrange', KEYS[1], 0, string.len(expected) - 1)
if string.len(stored) ~= string.len(expected) then return 0 end
stored = string.sub(stored, 1, 1) .. string.char(bit.band(string.byte(stored, 2), ${0xff & ~FLAG_AHEAD})) .. string.sub(stored, 3)
if stored ~= expected then return 0 end
local offset = tonumber(ARGV[3])
if offset >= 0 then
  redis.call('setrange', KEYS[1], offset, ARGV[2])
else
  redis.call('set', KEYS[1], ARGV[2] .. redis.call('getrange', KEYS[1], string.len(expected), -1))
end
redis.call('pexpire', KEYS[1], ARGV[4])
return 1`;

/**
 * A page fetched ahead taken (docs/cache.md#prefetch), on its key alone: if the entry is of format
 * ARGV[1] and carries the flag of a page no request has taken, the flag is cleared (its TTL kept,
 * as SETRANGE keeps it) and 1 answered: to one caller only, however many replicas take it at once.
 */
const TAKE_AHEAD_SCRIPT = `local head = redis.call('getrange', KEYS[1], 0, ${FLAGS_OFFSET})
if string.len(head) < ${FLAGS_OFFSET + 1} or string.byte(head, 1) ~= tonumber(ARGV[1]) then return 0 end
local flags = string.byte(head, ${FLAGS_OFFSET + 1})
if bit.band(flags, ${FLAG_AHEAD}) == 0 then return 0 end
redis.call('setrange', KEYS[1], ${FLAGS_OFFSET}, string.char(bit.band(flags, ${0xff & ~FLAG_AHEAD})))
return 1`;

/**
 * An invalidation's marks (docs/cache.md#soft-invalidation), on keys of one hash slot: ARGV[1] is
 * set first on each key's history of at most ARGV[4] marks (space-separated, newest first); the
 * first ARGV[2] keys keep no expiry, the others expire in ARGV[3] ms. The first key is the group's
 * lists key: it is given ARGV[5] (the mark with the records it names) and keeps ARGV[6] marks.
 */
const MARK_SCRIPT = `for i, key in ipairs(KEYS) do
  local value = ARGV[1]
  local keep = tonumber(ARGV[4])
  if i == 1 then
    value = ARGV[5]
    keep = tonumber(ARGV[6])
  end
  local old = redis.call('get', key)
  if old then
    local n = 1
    for mark in string.gmatch(old, '%S+') do
      if n >= keep then break end
      value = value .. ' ' .. mark
      n = n + 1
    end
  end
  if i <= tonumber(ARGV[2]) then redis.call('set', key, value) else redis.call('set', key, value, 'PX', ARGV[3]) end
end
return 1`;

const FRESHEN_RESULTS: Readonly<Record<string, FreshenResult>> = { '1': 'freshened', '0': 'changed', '-1': 'missing' };
/**
 * The scripts are sent by their SHA1 (EVALSHA): a script's text is longer than what a freshen or
 * a take carries, and saving bytes is the point. A node that does not have one (a new node, a
 * restart, a failover) answers NOSCRIPT once, and the text goes with that call (EVAL), which
 * caches it there.
 */
const FRESHEN_SHA = createHash('sha1').update(FRESHEN_SCRIPT).digest('hex');
const TAKE_AHEAD_SHA = createHash('sha1').update(TAKE_AHEAD_SCRIPT).digest('hex');
const MARK_SHA = createHash('sha1').update(MARK_SCRIPT).digest('hex');

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

  reachable(address: CacheAddress): boolean {
    return this.#health.usable(address.key);
  }

  async lookup(address: CacheAddress, known?: CacheEntry): Promise<StoreLookup> {
    if (!this.#health.usable(address.key)) return UNAVAILABLE;
    try {
      if (known !== undefined) {
        const confirmed = await this.#confirm(address, known);
        if (confirmed !== undefined) return confirmed;
      }
      const [generation, raw, ...marks] = await this.#client.mgetBuffer(
        address.generationKey,
        address.key,
        ...address.markKeys,
      );
      return found(raw === null || raw === undefined ? undefined : decodeEntry(raw), generation, marks);
    } catch (error) {
      this.#failed('lookup', address.key, error);
      return UNAVAILABLE;
    }
  }

  /**
   * `known` confirmed: the generation, the page's marks and the stored value's first bytes (two commands on one
   * hash slot, sent together: one round trip), compared with `known`'s stored prefix. `undefined`
   * when the value is another (a new fill, a freshen, a page taken) or gone: the caller reads it whole.
   */
  async #confirm(address: CacheAddress, known: CacheEntry): Promise<StoreLookup | undefined> {
    const expected = storedPrefix(known);
    // GETs, not an MGET: sent together (auto-pipelined, one round trip), and an MGET stays the
    // sign of a body read (what a confirmation exists to spare).
    const [prefix, generation, ...marks] = await Promise.all([
      this.#client.getrangeBuffer(address.key, 0, expected.length - 1),
      this.#client.getBuffer(address.generationKey),
      ...address.markKeys.map((key) => this.#client.getBuffer(key)),
    ]);
    return prefix.equals(expected) ? found(known, generation, marks) : undefined;
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
    if (ttl <= 0 || !isRevalidated(stored, fresher)) return 'changed';
    if (!this.#health.usable(address.key)) return 'unavailable';
    const { expected, bytes, offset } = revalidationPatch(stored, fresher);
    try {
      const reply = await this.#script(FRESHEN_SCRIPT, FRESHEN_SHA, address.key, expected, bytes, offset ?? -1, ttl);
      return FRESHEN_RESULTS[String(reply)] ?? 'unavailable';
    } catch (error) {
      this.#failed('freshen', address.key, error);
      return 'unavailable';
    }
  }

  async takeAhead(address: CacheAddress): Promise<boolean> {
    if (!this.#health.usable(address.key)) return false;
    try {
      return (await this.#script(TAKE_AHEAD_SCRIPT, TAKE_AHEAD_SHA, address.key, ENTRY_FORMAT_VERSION)) === 1;
    } catch (error) {
      this.#failed('take-ahead', address.key, error);
      return false;
    }
  }

  /** A script on keys of one hash slot, sent by its hash, and by its text where the node does not have it yet. */
  #script(
    script: string,
    sha: string,
    keys: string | readonly string[],
    ...args: ReadonlyArray<Buffer | number | string>
  ): Promise<unknown> {
    const named = typeof keys === 'string' ? [keys] : keys;
    return this.#client
      .evalsha(sha, named.length, ...named, ...args)
      .catch((error: unknown) =>
        isNoScript(error) ? this.#client.eval(script, named.length, ...named, ...args) : Promise.reject(error),
      );
  }

  /**
   * The marks in one script on the group's slot (MARK_SCRIPT): the lists' (and the whole
   * resource's) without expiry, one per group; each record's until `keepMs`, by when every entry
   * filled before it has gone (an evicted or expired mark makes the entries filled under it stale,
   * never fresh).
   */
  async invalidate({ keys, mark, listsMark, records, keepMs }: Invalidation): Promise<boolean> {
    if (!this.#health.usable(keys.lists)) return false;
    const kept = [keys.lists, ...(records === undefined ? [keys.all] : [])];
    const expiring = (records ?? []).map((id) => keys.record(id));
    const all = [...kept, ...expiring];
    const px = Math.max(1, Math.ceil(keepMs));
    try {
      await this.#script(MARK_SCRIPT, MARK_SHA, all, mark, kept.length, px, HISTORY, listsMark, LIST_HISTORY);
      return true;
    } catch (error) {
      this.#failed('invalidate', keys.lists, error);
      return false;
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
