/**
 * Where the operator state lives in Redis (issue 8), and the three atomic operations on it.
 *
 *   {<prefix>:ctl}:state   hash: field → entry text (operator-state.ts)
 *   {<prefix>:ctl}:meta    hash: `incarnation` (a random id, set when the state is first written to
 *                          this Redis), `born` (when that was, on Redis's clock) and `rev` (one
 *                          more at every change)
 *   <prefix>:ctl           pub/sub channel: one message per change
 *
 * One hash tag, so a Redis Cluster keeps both keys in one slot and the scripts stay atomic there.
 * A Redis that lost the state (flushed, restarted without persistence, failed over to an empty or
 * lagging replica) shows it by a missing `incarnation` or a `rev` lower than a replica has seen;
 * the replicas then merge what they know back in (operator-control.ts).
 *
 * Stamps, and the instant against which entries expire, are read from Redis's clock (`TIME`), so
 * replicas with skewed clocks agree on the order of changes. Each entry's expiry is the one its
 * change decided (operator-control.ts): a token's `exp`, or a tombstone's retention.
 */
import type { RedisClient } from '../platform/redis.js';
import {
  type EntryKind,
  type StateEntry,
  decodeEntry,
  encodeEntry,
  fieldOf,
  ttlOverrideSchema,
} from './operator-state.js';

/** Entries per write-back script call. */
const MERGE_BATCH = 500;

/** The keys of the earlier layout: `<prefix>:ctl:<suffix>`, and the kind each held. */
const LEGACY_HASHES: ReadonlyArray<readonly [string, EntryKind]> = [
  ['ttl', 'ttl'],
  ['rev:jti', 'jti'],
  ['rev:tok', 'tok'],
];
const LEGACY_SETS: ReadonlyArray<readonly [string, EntryKind]> = [
  ['rev:sub', 'sub'],
  ['block:co', 'co'],
  ['block:em', 'em'],
];

/** Redis time in ms, inside a script. */
const NOW = `local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)`;

/**
 * One change: stamped later than the entry it replaces, written, counted and announced; refused
 * (`lost`) when this Redis does not hold the state, so that a change never starts a new state that
 * lacks everything else (the caller writes everything back first).
 * KEYS: state, meta. ARGV: field, value JSON ('' for a deletion), expiry ms ('' for none: the
 * caller decides every entry's expiry, a tombstone's retention included), channel.
 */
const CHANGE_SCRIPT = `${NOW}
local incarnation = redis.call('hget', KEYS[2], 'incarnation')
if not incarnation then return {'lost'} end
local t = now
local current = redis.call('hget', KEYS[1], ARGV[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == 'table' and tonumber(decoded.t) and tonumber(decoded.t) >= t then t = tonumber(decoded.t) + 1 end
end
local x = 'null'
if ARGV[3] ~= '' then x = ARGV[3] end
local v = 'null'
if ARGV[2] ~= '' then v = ARGV[2] end
local entry = '{"t":' .. string.format('%d', t) .. ',"x":' .. x .. ',"v":' .. v .. '}'
redis.call('hset', KEYS[1], ARGV[1], entry)
local rev = redis.call('hincrby', KEYS[2], 'rev', 1)
redis.call('publish', ARGV[4], '{"rev":' .. rev .. ',"inc":' .. cjson.encode(incarnation) .. ',"f":' .. cjson.encode(ARGV[1]) .. ',"e":' .. entry .. '}')
return {'ok', incarnation, rev, entry}`;

/**
 * A write-back: each entry kept where it wins (the later stamp) and has not expired; the state gets
 * an incarnation if it had none. Announced (without the entries: replicas read it all) when
 * anything changed.
 * KEYS: state, meta. ARGV: incarnation if new, channel, then field, entry text pairs.
 */
const MERGE_SCRIPT = `${NOW}
local incarnation = redis.call('hget', KEYS[2], 'incarnation')
if not incarnation then
  incarnation = ARGV[1]
  redis.call('hset', KEYS[2], 'incarnation', incarnation, 'born', string.format('%d', now))
end
local written = 0
for i = 3, #ARGV, 2 do
  local field = ARGV[i]
  local text = ARGV[i + 1]
  local ok, incoming = pcall(cjson.decode, text)
  if ok and type(incoming) == 'table' and tonumber(incoming.t) then
    local x = tonumber(incoming.x)
    if x == nil or x > now then
      local wins = true
      local current = redis.call('hget', KEYS[1], field)
      if current then
        local ok2, existing = pcall(cjson.decode, current)
        if ok2 and type(existing) == 'table' and tonumber(existing.t) then
          local et = tonumber(existing.t)
          local it = tonumber(incoming.t)
          wins = it > et or (it == et and text > current)
        end
      end
      if wins then
        redis.call('hset', KEYS[1], field, text)
        written = written + 1
      end
    end
  end
end
local rev = tonumber(redis.call('hget', KEYS[2], 'rev') or '0')
if written > 0 then
  rev = redis.call('hincrby', KEYS[2], 'rev', 1)
  redis.call('publish', ARGV[2], '{"rev":' .. rev .. ',"inc":' .. cjson.encode(incarnation) .. '}')
end
return {incarnation, rev, written}`;

/**
 * The whole state with its meta and the incarnation's age (ms; -1 when it has no `born`: written
 * before it was kept, so old), in one atomic read. KEYS: state, meta.
 */
const READ_SCRIPT = `${NOW}
local born = tonumber(redis.call('hget', KEYS[2], 'born') or '')
local age = -1
if born then age = math.max(0, now - born) end
return {redis.call('hget', KEYS[2], 'incarnation') or '', tonumber(redis.call('hget', KEYS[2], 'rev') or '0'), redis.call('hgetall', KEYS[1]), age}`;

/** Drops the expired entries (on Redis's clock). KEYS: state. */
const PRUNE_SCRIPT = `${NOW}
local all = redis.call('hgetall', KEYS[1])
local dropped = 0
for i = 1, #all, 2 do
  local ok, entry = pcall(cjson.decode, all[i + 1])
  if ok and type(entry) == 'table' and tonumber(entry.x) and tonumber(entry.x) <= now then
    redis.call('hdel', KEYS[1], all[i])
    dropped = dropped + 1
  end
end
return dropped`;

export interface StateMeta {
  /** `undefined`: this Redis holds no state (never written, or lost). */
  readonly incarnation: string | undefined;
  readonly rev: number;
}

export type ChangeResult =
  | { readonly kind: 'ok'; readonly incarnation: string; readonly rev: number; readonly entry: StateEntry }
  | { readonly kind: 'lost' };

/** A change as announced on the channel; without `field`, replicas read the whole state. */
export interface ChangeMessage {
  readonly rev: number;
  readonly incarnation: string;
  readonly field?: string;
  readonly entry?: StateEntry;
}

export interface ControlStore {
  readonly channel: string;
  meta(): Promise<StateMeta>;
  /**
   * The whole state. `ageMs`: how long ago this incarnation began (`Infinity` when unknown: it
   * predates the record of it), so that a replica can tell a state just written anew, which other
   * replicas may not have merged their knowledge into yet.
   */
  read(): Promise<{
    readonly meta: StateMeta;
    readonly ageMs: number;
    readonly entries: Array<[string, StateEntry]>;
  }>;
  change(field: string, value: StateEntry['v'], expiresAt: number | null): Promise<ChangeResult>;
  merge(
    entries: Iterable<[string, StateEntry]>,
    incarnation: string,
  ): Promise<StateMeta & { readonly written: number }>;
  /**
   * The operator state as versions before issue 8 kept it (one key per kind, no stamps): field,
   * value and expiry of each, to be written as the oldest of entries.
   */
  legacy(): Promise<Array<[string, StateEntry['v'], number | null]>>;
  /** Removes those keys once merged (a tombstone must never lose to them later). */
  dropLegacy(): Promise<void>;
  prune(): Promise<number>;
  /** A channel message, checked; `undefined` for anything else. */
  parseMessage(text: string): ChangeMessage | undefined;
}

function asString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  throw new TypeError('unexpected reply from Redis');
}

export function createControlStore(client: RedisClient, prefix: string): ControlStore {
  const tag = `{${prefix}:ctl}`;
  const stateKey = `${tag}:state`;
  const metaKey = `${tag}:meta`;
  const channel = `${prefix}:ctl`;

  function parseMeta(incarnation: unknown, rev: unknown): StateMeta {
    const text = asString(incarnation);
    return { incarnation: text === '' ? undefined : text, rev: Number(rev) };
  }

  return {
    channel,
    async meta() {
      const [incarnation, rev] = await client.hmget(metaKey, 'incarnation', 'rev');
      return { incarnation: incarnation ?? undefined, rev: Number(rev ?? '0') };
    },
    async read() {
      const reply = (await client.eval(READ_SCRIPT, 2, stateKey, metaKey)) as [unknown, unknown, unknown[], unknown];
      const flat = reply[2];
      const entries: Array<[string, StateEntry]> = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const field = asString(flat[i]);
        const entry = decodeEntry(field, asString(flat[i + 1]));
        if (entry !== undefined) entries.push([field, entry]); // a malformed entry is skipped, never fatal
      }
      const age = Number(reply[3]);
      return { meta: parseMeta(reply[0], reply[1]), ageMs: age >= 0 ? age : Number.POSITIVE_INFINITY, entries };
    },
    async change(field, value, expiresAt) {
      const reply = (await client.eval(
        CHANGE_SCRIPT,
        2,
        stateKey,
        metaKey,
        field,
        value === null ? '' : JSON.stringify(value),
        expiresAt === null ? '' : String(Math.round(expiresAt)),
        channel,
      )) as unknown[];
      if (asString(reply[0]) === 'lost') return { kind: 'lost' };
      const entry = decodeEntry(field, asString(reply[3]));
      if (entry === undefined) throw new TypeError('the change script wrote an entry that does not decode');
      return { kind: 'ok', incarnation: asString(reply[1]), rev: Number(reply[2]), entry };
    },
    async merge(entries, incarnation) {
      // In batches: each is atomic on its own, and last-writer-wins needs no more than that.
      let batch: string[] = [];
      let written = 0;
      let meta: StateMeta | undefined;
      const flush = async (): Promise<void> => {
        const reply = (await client.eval(
          MERGE_SCRIPT,
          2,
          stateKey,
          metaKey,
          incarnation,
          channel,
          ...batch,
        )) as unknown[];
        meta = parseMeta(reply[0], reply[1]);
        written += Number(reply[2]);
        batch = [];
      };
      for (const [field, entry] of entries) {
        batch.push(field, encodeEntry(entry));
        if (batch.length >= 2 * MERGE_BATCH) await flush();
      }
      if (batch.length > 0 || meta === undefined) await flush();
      return { incarnation: meta?.incarnation, rev: meta?.rev ?? 0, written };
    },
    async legacy() {
      const hashes = await Promise.all(LEGACY_HASHES.map(([suffix]) => client.hgetall(`${prefix}:ctl:${suffix}`)));
      const sets = await Promise.all(LEGACY_SETS.map(([suffix]) => client.smembers(`${prefix}:ctl:${suffix}`)));
      const out: Array<[string, StateEntry['v'], number | null]> = [];
      LEGACY_HASHES.forEach(([, kind], i) => {
        for (const [id, text] of Object.entries(hashes[i] ?? {})) {
          if (kind === 'ttl') {
            let value: unknown;
            try {
              value = JSON.parse(text);
            } catch {
              continue;
            }
            const parsed = ttlOverrideSchema.safeParse(value);
            if (parsed.success) out.push([fieldOf('ttl', id), parsed.data, null]);
          } else if (Number.isFinite(Number(text))) {
            out.push([fieldOf(kind, id), true, Number(text) * 1000]);
          }
        }
      });
      LEGACY_SETS.forEach(([, kind], i) => {
        for (const id of sets[i] ?? []) out.push([fieldOf(kind, id), true, null]);
      });
      return out;
    },
    async dropLegacy() {
      await Promise.all([...LEGACY_HASHES, ...LEGACY_SETS].map(([suffix]) => client.del(`${prefix}:ctl:${suffix}`)));
    },
    async prune() {
      return Number(await client.eval(PRUNE_SCRIPT, 1, stateKey));
    },
    parseMessage(text) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        return undefined;
      }
      if (typeof json !== 'object' || json === null) return undefined;
      const { rev, inc, f, e } = json as Record<string, unknown>;
      if (typeof rev !== 'number' || typeof inc !== 'string') return undefined;
      if (typeof f !== 'string') return { rev, incarnation: inc };
      const entry = decodeEntry(f, JSON.stringify(e));
      return entry === undefined ? undefined : { rev, incarnation: inc, field: f, entry };
    },
  };
}
