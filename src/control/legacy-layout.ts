/**
 * The operator state as versions before issue 8 kept it: one key per kind, `<prefix>:ctl:<suffix>`,
 * and no stamps. A Redis that holds no state may still hold these keys; the replica that writes the
 * state anew takes them in as the oldest of entries, then removes them (operator-control.ts).
 */
import type { RedisClient } from '../platform/redis.js';
import { type EntryKind, type StateEntry, fieldOf, ttlOverrideSchema } from './operator-state.js';

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

/** An entry of the earlier layout: field, value and expiry (ms; `null`: none). */
export type LegacyEntry = [string, StateEntry['v'], number | null];

export async function readLegacy(client: RedisClient, prefix: string): Promise<LegacyEntry[]> {
  const hashes = await Promise.all(LEGACY_HASHES.map(([suffix]) => client.hgetall(`${prefix}:ctl:${suffix}`)));
  const sets = await Promise.all(LEGACY_SETS.map(([suffix]) => client.smembers(`${prefix}:ctl:${suffix}`)));
  const out: LegacyEntry[] = [];
  LEGACY_HASHES.forEach(([, kind], i) => {
    for (const [id, text] of Object.entries(hashes[i] ?? {})) {
      const entry = hashEntry(kind, id, text);
      if (entry !== undefined) out.push(entry);
    }
  });
  LEGACY_SETS.forEach(([, kind], i) => {
    for (const id of sets[i] ?? []) out.push([fieldOf(kind, id), true, null]);
  });
  return out;
}

/** A hash's value: a TTL override's JSON, or a revocation's `exp` in seconds; `undefined` if malformed. */
function hashEntry(kind: EntryKind, id: string, text: string): LegacyEntry | undefined {
  if (kind !== 'ttl') return Number.isFinite(Number(text)) ? [fieldOf(kind, id), true, Number(text) * 1000] : undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = ttlOverrideSchema.safeParse(value);
  return parsed.success ? [fieldOf('ttl', id), parsed.data, null] : undefined;
}

export async function dropLegacy(client: RedisClient, prefix: string): Promise<void> {
  await Promise.all([...LEGACY_HASHES, ...LEGACY_SETS].map(([suffix]) => client.del(`${prefix}:ctl:${suffix}`)));
}
