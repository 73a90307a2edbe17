/** The cache's pure parts: entry format, L1, policies, Cache-Status, If-None-Match. */
import { brotliCompressSync, brotliDecompressSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { formatCacheStatus } from '../../src/cache/entry/cache-status.js';
import {
  brotliBody,
  type CacheEntry,
  decodeEntry,
  ENTRY_FORMAT_VERSION,
  encodeEntry,
  gzipBody,
  isRevalidated,
  revalidationPatch,
  sameStoredEntry,
  storedPrefix,
  strongEtag,
} from '../../src/cache/entry/entry.js';
import { CachePolicies, type PolicyOverrides } from '../../src/cache/read/policy.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import { etagMatches } from '../../src/http/conditional.js';
import { configWith } from '../helpers/env.js';

const PAGE = Buffer.from(
  JSON.stringify({
    data: Array.from({ length: 30 }, (_, i) => ({
      id: 100 + i,
      status: 'available',
      warehouse_id: 7,
      created_at: '2026-01-01T00:00:00.000Z',
    })),
    meta: { per_page: 30, has_more: true, next_after_id: 129 },
  }),
);

function entry(body: Buffer, generation = 'g1'): CacheEntry {
  return {
    status: 200,
    contentType: 'application/json',
    etag: strongEtag(body),
    body,
    storedAt: 1_000,
    freshUntil: 31_000,
    keepUntil: 631_000,
    generation,
  };
}

describe('entry format', () => {
  it('round-trips small and large bodies', () => {
    for (const body of [Buffer.from('{}'), PAGE, Buffer.alloc(0)]) {
      const { brotli, ...decoded } = decodeEntry(encodeEntry(entry(body))) ?? {};
      expect(decoded).toEqual(entry(body));
      // The stored bytes are the brotli representation, kept beside the body with its own validator.
      expect(brotli === undefined ? undefined : brotliDecompressSync(brotli.body).equals(body)).toBe(
        body === PAGE ? true : undefined,
      );
    }
  });

  it('keeps the brotli body it was made with, decodes it back as the br representation with its own ETag', () => {
    const made = { ...entry(PAGE), brotli: brotliBody(PAGE, strongEtag(PAGE)) };
    expect(made.brotli?.etag).toBe(`${strongEtag(PAGE).slice(0, -1)}.br"`);
    const stored = encodeEntry(made);
    expect(
      stored.subarray(stored.length - (made.brotli?.body.length ?? 0)).equals(made.brotli?.body ?? Buffer.alloc(0)),
    ).toBe(true);
    expect(decodeEntry(stored)?.brotli).toEqual(made.brotli);
    // An entry whose body does not compress carries none and is stored as it is.
    expect(brotliBody(Buffer.from('{}'), '"x"')).toBeUndefined();
  });

  it('makes a gzip body once per identity body', () => {
    const first = gzipBody(PAGE, strongEtag(PAGE));
    expect(gunzipSync(first.body).equals(PAGE)).toBe(true);
    expect(first.etag).toBe(`${strongEtag(PAGE).slice(0, -1)}.gzip"`);
    expect(gzipBody(PAGE, strongEtag(PAGE))).toBe(first);
  });

  it('compresses a page to well under 0.4 of its raw size', () => {
    const stored = encodeEntry(entry(PAGE));
    expect(stored.length / PAGE.length).toBeLessThan(0.4);
  });

  it('stores incompressible bodies as they are', () => {
    const random = brotliCompressSync(PAGE); // already compressed: brotli cannot shrink it again
    const stored = encodeEntry(entry(random));
    expect(stored.readUInt8(1)).toBe(0);
    expect(decodeEntry(stored)?.body.equals(random)).toBe(true);
  });

  it('reads a corrupt, truncated or other-version entry as nothing', () => {
    const good = encodeEntry(entry(PAGE));
    const otherVersion = Buffer.from(good);
    otherVersion.writeUInt8(ENTRY_FORMAT_VERSION + 1, 0);
    const flipped = Buffer.from(good);
    flipped.writeUInt8(flipped.readUInt8(good.length - 5) ^ 0xff, good.length - 5);
    const hugeHeader = Buffer.from(good);
    hugeHeader.writeUInt32BE(1_000_000, 26);
    const notATime = Buffer.from(good);
    notATime.writeDoubleBE(Number.NaN, 10);
    /** A format-2 preamble: version, flags, the three times, the header's length. */
    const preamble = (header: string): Buffer => {
      const out = Buffer.alloc(30);
      out.writeUInt8(ENTRY_FORMAT_VERSION, 0);
      out.writeUInt32BE(Buffer.byteLength(header), 26);
      return Buffer.concat([out, Buffer.from(header)]);
    };
    const badJson = preamble('{x}');
    const wrongTypes = preamble('{}');
    const wrongValidator = preamble('{"s":200,"t":"a","e":"\\"x\\"","g":"g","n":0,"ue":7}');
    expect(decodeEntry(preamble('{"s":200,"t":"a","e":"\\"x\\"","g":"g","n":0,"ue":"\\"u\\""}'))).toBeDefined();
    for (const bad of [
      good.subarray(0, good.length - 10),
      otherVersion,
      flipped,
      hugeHeader,
      notATime,
      badJson,
      wrongTypes,
      wrongValidator,
      Buffer.alloc(3),
    ]) {
      expect(decodeEntry(bad)).toBeUndefined();
    }
  });

  it('reads an entry of format 1 (before the validators) as nothing: a miss the next fill replaces', () => {
    const header = Buffer.from(
      JSON.stringify({ s: 200, t: 'application/json', e: '"x"', a: 1, f: 2, k: 3, g: 'g1', n: 2 }),
    );
    const v1 = Buffer.concat([Buffer.from([1, 0]), Buffer.alloc(4), header, Buffer.from('{}')]);
    v1.writeUInt32BE(header.length, 2);
    expect(ENTRY_FORMAT_VERSION).toBe(2);
    expect(decodeEntry(v1)).toBeUndefined();
  });

  it('keeps the upstream’s validators, and the times in a fixed block at bytes 2–25', () => {
    const withValidators: CacheEntry = {
      ...entry(PAGE),
      upstreamEtag: 'W/"up-1"',
      lastModified: 'Tue, 03 Nov 2026 10:00:00 GMT',
    };
    const stored = encodeEntry(withValidators);
    expect(decodeEntry(stored)).toMatchObject({
      upstreamEtag: 'W/"up-1"',
      lastModified: 'Tue, 03 Nov 2026 10:00:00 GMT',
      etag: strongEtag(PAGE),
    });
    expect([stored.readDoubleBE(2), stored.readDoubleBE(10), stored.readDoubleBE(18)]).toEqual([
      1_000, 31_000, 631_000,
    ]);
    // Without validators, the header has no field for them at all.
    expect(encodeEntry(entry(PAGE)).toString('latin1')).not.toContain('"ue"');
  });

  it('freshens in place: the 24-byte block when the header is unchanged, else the whole prefix', () => {
    const held = decodeEntry(encodeEntry({ ...entry(PAGE), upstreamEtag: '"a"' }));
    if (held === undefined) throw new Error('decodes');
    const later = { storedAt: 50_000, freshUntil: 80_000, keepUntil: 680_000 };
    const apply = (fresher: CacheEntry): Buffer => {
      const stored = Buffer.from(encodeEntry(held));
      const { expected, bytes, offset } = revalidationPatch(held, fresher);
      expect(stored.subarray(0, expected.length).equals(expected)).toBe(true);
      if (offset === undefined) return Buffer.concat([bytes, stored.subarray(expected.length)]);
      bytes.copy(stored, offset);
      return stored;
    };
    const sameHeader = { ...held, ...later };
    expect(isRevalidated(held, sameHeader)).toBe(true);
    const block = revalidationPatch(held, sameHeader);
    expect([block.offset, block.bytes.length]).toEqual([2, 24]);
    expect(apply(sameHeader).equals(encodeEntry(sameHeader))).toBe(true);
    const sameLength = { ...held, ...later, upstreamEtag: '"b"' };
    expect(revalidationPatch(held, sameLength).offset).toBe(0);
    expect(apply(sameLength).equals(encodeEntry(sameLength))).toBe(true);
    const longer = { ...held, ...later, upstreamEtag: '"bb"', lastModified: 'Tue, 03 Nov 2026 10:00:00 GMT' };
    expect(revalidationPatch(held, longer).offset).toBeUndefined();
    const moved = decodeEntry(apply(longer));
    expect(moved?.body.equals(PAGE)).toBe(true);
    expect(moved).toMatchObject({ ...later, upstreamEtag: '"bb"', etag: held.etag });
    // Another body is no freshening.
    expect(isRevalidated(held, { ...entry(Buffer.from('{"other":1}')), ...later })).toBe(false);
  });

  it('compares a freshen against the prefix as it was read, not as it would be written again', () => {
    const bytes = encodeEntry(entry(PAGE));
    const decoded = decodeEntry(bytes);
    if (decoded === undefined) throw new Error('decodes');
    const prefixLength = 30 + bytes.readUInt32BE(26);
    expect(storedPrefix(decoded).equals(bytes.subarray(0, prefixLength))).toBe(true);
    expect(storedPrefix(decoded).buffer).toBe(bytes.buffer);
    expect(sameStoredEntry(decoded, { ...decoded })).toBe(true);
    expect(sameStoredEntry(decoded, { ...decoded, storedAt: decoded.storedAt + 1 })).toBe(false);
  });

  it('gives a strong ETag that depends on every byte', () => {
    expect(strongEtag(PAGE)).toBe(strongEtag(Buffer.from(PAGE)));
    expect(strongEtag(PAGE)).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    const changed = Buffer.from(PAGE);
    changed.writeUInt8(changed.readUInt8(10) + 1, 10);
    expect(strongEtag(changed)).not.toBe(strongEtag(PAGE));
  });
});

describe('L1', () => {
  it('serves an entry only under the generation last seen for its group', () => {
    const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 60_000 });
    l1.set('k', entry(PAGE, 'g1'));
    expect(l1.get('k', 'tag')).toBeUndefined(); // no generation seen yet
    l1.noteGeneration('tag', 'g1');
    expect(l1.get('k', 'tag')?.generation).toBe('g1');
    l1.noteGeneration('tag', 'g2'); // a purge, seen in a lookup
    expect(l1.get('k', 'tag')).toBeUndefined();
    l1.noteGeneration('tag', 'g1');
    l1.forgetGroup('tag'); // a purge announced
    expect(l1.get('k', 'tag')).toBeUndefined();
  });

  it('asks for a copy to be read again late in its lifetime, at a point of its key’s own', () => {
    let at = 1_000;
    const l1 = new L1Cache({ maxBytes: 16 * 1_048_576, ttlMs: 1_000, clock: { now: () => at } });
    l1.noteGeneration('tag', 'g1');
    const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
    for (const key of keys) l1.set(key, entry(PAGE, 'g1'));
    const due = (): number => keys.filter((key) => l1.dueForReread(key) !== undefined).length;
    at += 499; // more than half the lifetime left: none
    expect(due()).toBe(0);
    at += 151; // 350 ms left: the keys whose point is earlier, not the others
    expect(due()).toBeGreaterThan(20);
    expect(due()).toBeLessThan(180);
    at += 150; // 200 ms left: every key
    expect(due()).toBe(keys.length);
    // Set again (read from the store): a whole lifetime once more.
    for (const key of keys) l1.set(key, entry(PAGE, 'g1'));
    expect(due()).toBe(0);
    expect(l1.get('k1', 'tag')).toBeDefined();
  });

  it('serves a copy for its L1 lifetime and not a moment longer', () => {
    let at = 5_000;
    const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 1_000, clock: { now: () => at } });
    l1.noteGeneration('tag', 'g1');
    l1.set('k', entry(PAGE, 'g1'));
    at += 999;
    expect(l1.get('k', 'tag')).toBeDefined();
    at += 1;
    expect(l1.get('k', 'tag')).toBeUndefined();
    expect(l1.dueForReread('k')).toBeUndefined(); // not served: nothing to confirm
  });

  it('renews a copy whose confirmation found the store unavailable for another lifetime', () => {
    let at = 5_000;
    const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 1_000, clock: { now: () => at } });
    l1.noteGeneration('tag', 'g1');
    l1.set('k', entry(PAGE, 'g1'));
    at += 900;
    l1.renew('k');
    at += 900;
    expect(l1.get('k', 'tag')?.generation).toBe('g1');
    l1.renew('absent'); // nothing held: nothing renewed
    expect(l1.get('absent', 'tag')).toBeUndefined();
  });

  describe('standing in for a store that cannot be asked', () => {
    it('gives the last copy past its lifetime, of the generation last seen, as a store would', () => {
      let at = 5_000;
      const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 1_000, clock: { now: () => at } });
      l1.noteGeneration('tag', 'g1');
      l1.set('k', entry(PAGE, 'g1'));
      at += 10_000;
      expect(l1.get('k', 'tag')).toBeUndefined();
      const lookup = l1.standIn('k', 'tag');
      expect(lookup).toMatchObject({ generation: 'g1', available: false });
      expect(lookup.entry?.body.equals(PAGE)).toBe(true);
      expect(l1.standIn('other', 'tag')).toEqual({ entry: undefined, generation: 'g1', available: false });
    });

    it('never gives a copy of a generation a purge made old', () => {
      const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 1_000 });
      l1.noteGeneration('tag', 'g1');
      l1.set('k', entry(PAGE, 'g1'));
      l1.forgetGroup('tag'); // a purge announced before Redis went away
      const lookup = l1.standIn('k', 'tag');
      expect(lookup.entry).toBeUndefined();
      expect(lookup.generation).not.toBe('g1');
      l1.noteGeneration('tag', 'g2');
      expect(l1.standIn('k', 'tag')).toEqual({ entry: undefined, generation: 'g2', available: false });
    });

    it('names a provisional generation for a group never seen, dropped once the store names its own', () => {
      const l1 = new L1Cache({ maxBytes: 1_048_576, ttlMs: 60_000 });
      const { generation } = l1.standIn('k', 'tag');
      expect(generation).toMatch(/^provisional\./);
      expect(l1.standIn('k', 'tag').generation).toBe(generation); // the same one while it lasts
      l1.set('k', entry(PAGE, generation)); // what a fill fetched meanwhile
      expect(l1.get('k', 'tag')).toBeDefined();
      l1.noteGeneration('tag', 'g1'); // Redis answers again
      expect(l1.get('k', 'tag')).toBeUndefined();
    });
  });

  it('is bounded by bytes, and admits a page that would push others out on its second offer', () => {
    const l1 = new L1Cache({ maxBytes: PAGE.length * 3, ttlMs: 60_000 });
    l1.noteGeneration('tag', 'g1');
    for (let i = 0; i < 10; i++) l1.set(`k${i}`, entry(PAGE));
    const kept = Array.from({ length: 10 }, (_, i) => l1.get(`k${i}`, 'tag')).filter((e) => e !== undefined);
    expect(kept.length).toBeLessThanOrEqual(3);
    expect(l1.get('k0', 'tag')).toBeDefined(); // in while there was room
    expect(l1.get('k9', 'tag')).toBeUndefined(); // offered once, when it would have pushed k0 out
    l1.set('k9', entry(PAGE));
    expect(l1.get('k9', 'tag')).toBeDefined();
    expect(l1.footprint().bytes).toBeLessThanOrEqual(PAGE.length * 3);
  });

  it('renews a copy it holds whatever the pressure', () => {
    let at = 0;
    const l1 = new L1Cache({ maxBytes: PAGE.length * 3, ttlMs: 1_000, clock: { now: () => at } });
    l1.noteGeneration('tag', 'g1');
    l1.set('k0', entry(PAGE));
    l1.set('k1', entry(PAGE));
    at = 900;
    l1.set('k1', entry(PAGE)); // held: set again, not offered
    at = 1_500;
    expect(l1.get('k1', 'tag')).toBeDefined();
  });

  it('reports what it holds, as counted against its bound (slab_proxy_cache_entries and _bytes)', () => {
    const l1 = new L1Cache({ maxBytes: PAGE.length * 3, ttlMs: 60_000 });
    expect(l1.footprint()).toEqual({ entries: 0, bytes: 0 });
    l1.set('k0', entry(PAGE));
    expect(l1.footprint().entries).toBe(1);
    expect(l1.footprint().bytes).toBeGreaterThan(PAGE.length);
    for (let i = 1; i < 10; i++) l1.set(`k${i}`, entry(PAGE));
    const { entries, bytes } = l1.footprint();
    expect(entries).toBeGreaterThan(0);
    expect(entries).toBeLessThanOrEqual(3);
    expect(bytes).toBeLessThanOrEqual(PAGE.length * 3);
  });
});

describe('memory store', () => {
  it('reports what it holds, and nothing once an entry is past its keepUntil', async () => {
    let now = 1_000;
    const store = createMemoryStore({ maxBytes: 1_048_576, now: () => now });
    const address = {
      group: { company: '1', resource: 'receipts' as const },
      tag: '{1:receipts}',
      key: 'slab:{1:receipts}:co:list:per_page=30',
      generationKey: 'g',
      leaseKey: 'l',
      markKeys: [],
    };
    expect(store.footprint?.()).toEqual({ entries: 0, bytes: 0 });
    expect(await store.save(address, entry(PAGE))).toBe(true);
    expect(store.footprint?.().entries).toBe(1);
    expect(store.footprint?.().bytes).toBeGreaterThan(PAGE.length);
    now = 700_000;
    expect((await store.lookup(address)).entry).toBeUndefined();
    expect(store.footprint?.()).toEqual({ entries: 0, bytes: 0 });
  });

  it('keeps a page that would push others out only on its second offer', async () => {
    const store = createMemoryStore({ maxBytes: PAGE.length * 3, now: () => 1_000 });
    const at = (n: number) => ({
      group: { company: '1', resource: 'receipts' as const },
      tag: '{1:receipts}',
      key: `slab:{1:receipts}:co:list:per_page=${String(n)}`,
      generationKey: 'g',
      leaseKey: 'l',
      markKeys: [],
    });
    const kept: boolean[] = [];
    for (let n = 1; n <= 4; n++) kept.push(await store.save(at(n), entry(PAGE)));
    // Two fit; the third and fourth would push one out: not kept, on their first offer.
    expect(kept).toEqual([true, true, false, false]);
    expect((await store.lookup(at(1))).entry).toBeDefined();
    expect(await store.save(at(3), entry(PAGE))).toBe(true); // the second offer
    expect((await store.lookup(at(3))).entry).toBeDefined();
    expect(store.footprint?.().bytes).toBeLessThanOrEqual(PAGE.length * 3);
  });
});

describe('cache policies', () => {
  it('layers defaults, per-resource settings and run-time overrides', () => {
    const policies = new CachePolicies(
      configWith({ cache: { resources: { receipts: { ttl: 5, partition: 'employee' } } } }).cache,
    );
    expect(policies.policyFor('warehouses')).toMatchObject({ ttl: 300, staleIfError: 600, partition: 'company' });
    expect(policies.policyFor('receipts')).toMatchObject({ ttl: 5, staleWhileRevalidate: 30, partition: 'employee' });
    const overrides: PolicyOverrides = { receipts: { ttl: 9 }, remnants: { notFoundTtl: 1 } };
    policies.setOverrides(overrides);
    expect(policies.policyFor('receipts')).toMatchObject({ ttl: 9, partition: 'employee' });
    expect(policies.policyFor('remnants').notFoundTtl).toBe(1);
    policies.setConfig(configWith({}).cache);
    expect(policies.policyFor('receipts')).toMatchObject({ ttl: 9, partition: 'company' });
  });
});

describe('Cache-Status (RFC 9211)', () => {
  it.each([
    [{ kind: 'hit', ttl: 12 } as const, 'slab-proxy; hit; ttl=12'],
    [{ kind: 'revalidating', ttl: -3 } as const, 'slab-proxy; hit; ttl=-3; detail=stale-while-revalidate'],
    [{ kind: 'miss', fwdStatus: 200, stored: true } as const, 'slab-proxy; fwd=miss; fwd-status=200; stored'],
    [{ kind: 'miss', fwdStatus: 403, stored: false } as const, 'slab-proxy; fwd=miss; fwd-status=403'],
    [{ kind: 'collapsed', fwdStatus: 200 } as const, 'slab-proxy; fwd=miss; fwd-status=200; collapsed'],
    [{ kind: 'stale-if-error', ttl: -40, fwdStatus: 503 } as const, 'slab-proxy; fwd=stale; fwd-status=503; ttl=-40'],
    [
      { kind: 'miss', fwdStatus: 304, stored: true, stale: true } as const,
      'slab-proxy; fwd=stale; fwd-status=304; stored',
    ],
    [{ kind: 'miss', fwdStatus: 304, stored: false, stale: true } as const, 'slab-proxy; fwd=stale; fwd-status=304'],
    [{ kind: 'collapsed', fwdStatus: 304, stale: true } as const, 'slab-proxy; fwd=stale; fwd-status=304; collapsed'],
  ])('%j → %s', (status, header) => {
    expect(formatCacheStatus(status)).toBe(header);
    expect(header).not.toContain('key');
  });
});

describe('If-None-Match', () => {
  const tag = '"abc"';
  it.each([
    ['"abc"', true],
    ['W/"abc"', true],
    ['"x", "abc"', true],
    ['*', true],
    ['"abcd"', false],
    ['abc', false],
    ['', false],
  ])('%s → %s', (header, matches) => {
    expect(etagMatches(header, tag)).toBe(matches);
  });
  it('no header never matches', () => {
    expect(etagMatches(undefined, tag)).toBe(false);
  });
});
