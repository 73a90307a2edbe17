/** The cache's pure parts: entry format, L1, policies, Cache-Status, If-None-Match. */
import { brotliCompressSync, brotliDecompressSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { formatCacheStatus } from '../../src/cache/cache-status.js';
import {
  type CacheEntry,
  ENTRY_FORMAT_VERSION,
  brotliBody,
  decodeEntry,
  encodeEntry,
  gzipBody,
  strongEtag,
} from '../../src/cache/entry.js';
import { L1Cache } from '../../src/cache/l1.js';
import { createMemoryStore } from '../../src/cache/memory-store.js';
import { CachePolicies, type PolicyOverrides } from '../../src/cache/policy.js';
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
    hugeHeader.writeUInt32BE(1_000_000, 2);
    const badJson = Buffer.concat([Buffer.from([ENTRY_FORMAT_VERSION, 0, 0, 0, 0, 3]), Buffer.from('{x}')]);
    const wrongTypes = Buffer.concat([Buffer.from([ENTRY_FORMAT_VERSION, 0, 0, 0, 0, 2]), Buffer.from('{}')]);
    for (const bad of [
      good.subarray(0, good.length - 10),
      otherVersion,
      flipped,
      hugeHeader,
      badJson,
      wrongTypes,
      Buffer.alloc(3),
    ]) {
      expect(decodeEntry(bad)).toBeUndefined();
    }
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
    const due = (): number => keys.filter((key) => l1.dueForReread(key)).length;
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
    expect(l1.dueForReread('k')).toBe(false); // gone: nothing to read again
    expect(l1.footprint().entries).toBe(0);
  });

  it('is bounded by bytes', () => {
    const l1 = new L1Cache({ maxBytes: PAGE.length * 3, ttlMs: 60_000 });
    l1.noteGeneration('tag', 'g1');
    for (let i = 0; i < 10; i++) l1.set(`k${i}`, entry(PAGE));
    const kept = Array.from({ length: 10 }, (_, i) => l1.get(`k${i}`, 'tag')).filter((e) => e !== undefined);
    expect(kept.length).toBeLessThanOrEqual(3);
    expect(l1.get('k9', 'tag')).toBeDefined();
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
    };
    expect(store.footprint?.()).toEqual({ entries: 0, bytes: 0 });
    expect(await store.save(address, entry(PAGE))).toBe(true);
    expect(store.footprint?.().entries).toBe(1);
    expect(store.footprint?.().bytes).toBeGreaterThan(PAGE.length);
    now = 700_000;
    expect((await store.lookup(address)).entry).toBeUndefined();
    expect(store.footprint?.()).toEqual({ entries: 0, bytes: 0 });
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
