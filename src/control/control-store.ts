/**
 * Where the operator state lives in Redis, and the three atomic operations on it.
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
 * change decided (operator-control.ts): a token's `exp`, or a tombstone's retention. The scripts
 * are in control-scripts.ts.
 */
import type { RedisClient } from '../platform/redis/connection.js';
import { CHANGE_SCRIPT, MERGE_SCRIPT, PRUNE_SCRIPT, READ_SCRIPT } from './control-scripts.js';
import { decodeEntry, encodeEntry, type StateEntry } from './operator-state.js';

/** Entries per write-back script call. */
const MERGE_BATCH = 500;

export interface StateMeta {
  /** `undefined`: this Redis holds no state (never written, or lost). */
  readonly incarnation: string | undefined;
  readonly rev: number;
}

/**
 * The whole state. `ageMs`: how long ago this incarnation began (`Infinity` when unknown: it
 * predates the record of it), so that a replica can tell a state just written anew, which other
 * replicas may not have merged their knowledge into yet.
 */
export interface StateRead {
  readonly meta: StateMeta;
  readonly ageMs: number;
  readonly entries: Array<[string, StateEntry]>;
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
  read(): Promise<StateRead>;
  change(field: string, value: StateEntry['v'], expiresAt: number | null): Promise<ChangeResult>;
  /** `floor`: the highest `rev` the writer has seen, when it found Redis behind it (else 0). */
  merge(
    entries: Iterable<[string, StateEntry]>,
    incarnation: string,
    floor?: number,
  ): Promise<StateMeta & { readonly written: number }>;
  prune(): Promise<number>;
  /** A channel message, checked; `undefined` for anything else. */
  parseMessage(text: string): ChangeMessage | undefined;
}

/** The keys and the channel of one prefix's state (see the module's comment). */
interface ControlKeys {
  readonly state: string;
  readonly meta: string;
  readonly channel: string;
}

export function createControlStore(client: RedisClient, prefix: string): ControlStore {
  const tag = `{${prefix}:ctl}`;
  const keys: ControlKeys = { state: `${tag}:state`, meta: `${tag}:meta`, channel: `${prefix}:ctl` };
  return {
    channel: keys.channel,
    meta: () => readMeta(client, keys),
    read: () => readState(client, keys),
    change: (field, value, expiresAt) => writeChange(client, keys, field, value, expiresAt),
    merge: (entries, incarnation, floor = 0) => mergeEntries(client, keys, entries, incarnation, floor),
    prune: () => pruneExpired(client, keys),
    parseMessage,
  };
}

async function readMeta(client: RedisClient, keys: ControlKeys): Promise<StateMeta> {
  const [incarnation, rev] = await client.hmget(keys.meta, 'incarnation', 'rev');
  return { incarnation: incarnation ?? undefined, rev: Number(rev ?? '0') };
}

async function readState(client: RedisClient, keys: ControlKeys): Promise<StateRead> {
  const reply = (await client.eval(READ_SCRIPT, 2, keys.state, keys.meta)) as [unknown, unknown, unknown[], unknown];
  const entries = decodeEntries(reply[2]);
  const age = Number(reply[3]);
  return { meta: parseMeta(reply[0], reply[1]), ageMs: age >= 0 ? age : Number.POSITIVE_INFINITY, entries };
}

/** `HGETALL`'s flat field, text list as entries; a malformed entry is skipped, never fatal. */
function decodeEntries(flat: unknown[]): Array<[string, StateEntry]> {
  const entries: Array<[string, StateEntry]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = asString(flat[i]);
    const entry = decodeEntry(field, asString(flat[i + 1]));
    if (entry !== undefined) entries.push([field, entry]);
  }
  return entries;
}

async function writeChange(
  client: RedisClient,
  keys: ControlKeys,
  field: string,
  value: StateEntry['v'],
  expiresAt: number | null,
): Promise<ChangeResult> {
  const reply = (await client.eval(
    CHANGE_SCRIPT,
    2,
    keys.state,
    keys.meta,
    field,
    value === null ? '' : JSON.stringify(value),
    expiresAt === null ? '' : String(Math.round(expiresAt)),
    keys.channel,
  )) as unknown[];
  if (asString(reply[0]) === 'lost') return { kind: 'lost' };
  const entry = decodeEntry(field, asString(reply[3]));
  if (entry === undefined) throw new TypeError('the change script wrote an entry that does not decode');
  return { kind: 'ok', incarnation: asString(reply[1]), rev: Number(reply[2]), entry };
}

async function mergeEntries(
  client: RedisClient,
  keys: ControlKeys,
  entries: Iterable<[string, StateEntry]>,
  incarnation: string,
  floor: number,
): Promise<StateMeta & { readonly written: number }> {
  // In batches: each is atomic on its own, and last-writer-wins needs no more than that.
  let batch: string[] = [];
  let written = 0;
  let meta: StateMeta | undefined;
  const flush = async (): Promise<void> => {
    const merged = await mergeBatch(client, keys, incarnation, floor, batch);
    meta = merged.meta;
    written += merged.written;
    batch = [];
  };
  for (const [field, entry] of entries) {
    batch.push(field, encodeEntry(entry));
    if (batch.length >= 2 * MERGE_BATCH) await flush();
  }
  if (batch.length > 0 || meta === undefined) await flush();
  return { incarnation: meta?.incarnation, rev: meta?.rev ?? 0, written };
}

/** One call of the write-back script: `pairs` is field, entry text, field, entry text, …. */
async function mergeBatch(
  client: RedisClient,
  keys: ControlKeys,
  incarnation: string,
  floor: number,
  pairs: string[],
): Promise<{ readonly meta: StateMeta; readonly written: number }> {
  const reply = (await client.eval(
    MERGE_SCRIPT,
    2,
    keys.state,
    keys.meta,
    incarnation,
    keys.channel,
    String(floor),
    ...pairs,
  )) as unknown[];
  return { meta: parseMeta(reply[0], reply[1]), written: Number(reply[2]) };
}

async function pruneExpired(client: RedisClient, keys: ControlKeys): Promise<number> {
  return Number(await client.eval(PRUNE_SCRIPT, 1, keys.state));
}

function parseMessage(text: string): ChangeMessage | undefined {
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
}

function parseMeta(incarnation: unknown, rev: unknown): StateMeta {
  const text = asString(incarnation);
  return { incarnation: text === '' ? undefined : text, rev: Number(rev) };
}

function asString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  throw new TypeError('unexpected reply from Redis');
}
