/** A stored 200 entry of a small JSON body, for the suites that judge what happens to one. */
import type { CacheEntry } from '../../src/cache/entry/entry.js';

/** Stored at `storedAt`, fresh 10 s and kept 10 min unless `fields` say otherwise. */
export function storedEntry(storedAt: number, fields: Partial<CacheEntry> = {}): CacheEntry {
  return {
    status: 200,
    contentType: 'application/json',
    etag: '"e"',
    body: Buffer.from('{}'),
    storedAt,
    freshUntil: storedAt + 10_000,
    keepUntil: storedAt + 600_000,
    generation: 'g',
    ...fields,
  };
}
