/**
 * Compressed pages straight from the store (docs/clients.md#content-coding), on both stores: a client
 * that accepts `br` gets the stored brotli bytes themselves, one that accepts only `gzip` a gzip
 * body, everyone else the upstream's identity bytes; every answer decodes to the upstream's bytes,
 * each representation has its own validator and its own 304, and nothing is sent in a coding the
 * client did not accept. Raw sockets show the bytes on the wire; undici's fetch and got, which
 * decode for their callers, show what applications see.
 */
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { got } from 'got';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { emptyCache, type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
/** A page of 30 records: what "about 0.15× its JSON on the wire" is about (docs/clients.md#content-coding). */
const PAGE = `${P}/receipts?per_page=30`;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
});
afterAll(() => redis.stop());

function acceptEncoding(value: string): { headers: ReadonlyArray<readonly [string, string]> } {
  return { headers: [['Accept-Encoding', value]] };
}

describe.each(['memory', 'redis'] as const)('content coding on the %s store', (storeKind) => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let bearer: string;
  /** The upstream's own bytes for the page, asked directly. */
  let upstreamBytes: Buffer;

  beforeEach(async () => {
    if (storeKind === 'redis') await emptyCache(redis.url);
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, ...(storeKind === 'redis' && { redisUrl: redis.url }) });
    bearer = await token();
    upstreamBytes = (await getWithToken(sandbox.url, PAGE, bearer)).body;
  });
  afterEach(async () => {
    await proxy.close();
    await sandbox.close();
  });

  const get = (
    target: string,
    value?: string,
    extra: ReadonlyArray<readonly [string, string]> = [],
  ): Promise<RawResponse> =>
    getWithToken(proxy.url, target, bearer, {
      headers: [...(value === undefined ? [] : acceptEncoding(value).headers), ...extra],
    });

  it('br: the stored brotli bytes, at most 0.2× the identity body, decoding to the upstream’s bytes (miss and hit alike)', async () => {
    for (const expected of ['fwd=miss', 'hit']) {
      const res = await get(PAGE, 'gzip, deflate, br');
      expect(res.status).toBe(200);
      expect(res.headers['cache-status']).toContain(expected);
      expect(res.headers['content-encoding']).toBe('br');
      expect(res.headers.vary).toBe('Accept-Encoding, Authorization');
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
      expect(res.body.length / upstreamBytes.length).toBeLessThanOrEqual(0.2);
      expect(brotliDecompressSync(res.body).equals(upstreamBytes)).toBe(true);
    }
    if (storeKind === 'redis') {
      // The bytes on the wire are the tail of what Redis holds: nothing was compressed again.
      const admin = new Redis(redis.url);
      const keys = await admin.keys('slab:{1:receipts}:co:list:*');
      const stored = await admin.getBuffer(keys[0] ?? '');
      admin.disconnect();
      const res = await get(PAGE, 'br');
      expect(stored?.subarray(stored.length - res.body.length).equals(res.body)).toBe(true);
    }
  });

  it('gzip for a client that accepts gzip alone; identity, unchanged, for one that sends no Accept-Encoding', async () => {
    const gz = await get(PAGE, 'gzip');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).equals(upstreamBytes)).toBe(true);
    for (const value of [undefined, '', 'deflate', 'br;q=0, gzip;q=0']) {
      const plain = await get(PAGE, value);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.headers.vary).toBe('Accept-Encoding, Authorization');
      expect(plain.body.equals(upstreamBytes)).toBe(true);
    }
  });

  it('a validator per representation, and If-None-Match works for each', async () => {
    const [identity, br, gz] = [await get(PAGE), await get(PAGE, 'br'), await get(PAGE, 'gzip')];
    const tags = [identity, br, gz].map((res) => res.headers.etag ?? '');
    expect(new Set(tags).size).toBe(3);
    for (const [value, tag] of [
      [undefined, tags[0]],
      ['br', tags[1]],
      ['gzip', tags[2]],
    ] as const) {
      const notModified = await get(PAGE, value, [['If-None-Match', tag ?? '']]);
      expect(notModified.status).toBe(304);
      expect(notModified.headers.etag).toBe(tag);
      expect(notModified.headers['content-encoding']).toBeUndefined();
      expect(notModified.headers.vary).toBe('Accept-Encoding, Authorization');
    }
    // Another representation's tag does not match the one selected: the whole page comes.
    const other = await get(PAGE, 'br', [['If-None-Match', tags[0] ?? '']]);
    expect(other.status).toBe(200);
    expect(other.headers['content-encoding']).toBe('br');
  });

  it('HEAD: the headers of the coded answer, no body', async () => {
    const full = await get(PAGE, 'br');
    const head = await getWithToken(proxy.url, PAGE, bearer, { method: 'HEAD', ...acceptEncoding('br') });
    expect(head.status).toBe(200);
    expect(head.headers['content-encoding']).toBe('br');
    expect(head.headers['content-length']).toBe(String(full.body.length));
    expect(head.headers.etag).toBe(full.headers.etag);
  });

  it('never a coding the client did not accept: identity;q=0 takes br; nothing acceptable is a 406', async () => {
    const br = await get(PAGE, 'identity;q=0, br');
    expect(br.headers['content-encoding']).toBe('br');
    for (const value of ['*;q=0', 'identity;q=0', 'identity;q=0, deflate']) {
      const refused = await get(PAGE, value);
      expect(refused.status).toBe(406);
      expect((refused.json() as { code: string }).code).toBe('not_acceptable');
      expect(refused.headers['cache-control']).toBe('no-store');
    }
    // A body too small to compress has no brotli form: identity when allowed, else 406.
    const small = `${P}/receipts/999999999`;
    const missing = await get(small, 'br');
    expect(missing.status).toBe(404);
    expect(missing.headers['content-encoding']).toBeUndefined();
    expect((await get(small, 'br, identity;q=0')).status).toBe(406);
  });

  it('real clients decode it to the upstream’s bytes: undici’s fetch and got', async () => {
    const viaFetch = await fetch(`${proxy.url}${PAGE}`, { headers: { authorization: `Bearer ${bearer}` } });
    expect(viaFetch.headers.get('content-encoding')).toMatch(/^(br|gzip)$/);
    expect(Buffer.from(await viaFetch.arrayBuffer()).equals(upstreamBytes)).toBe(true);
    const viaGot = await got(`${proxy.url}${PAGE}`, {
      headers: { authorization: `Bearer ${bearer}` },
      responseType: 'buffer',
      retry: { limit: 0 },
    });
    expect(viaGot.body.equals(upstreamBytes)).toBe(true);
  });
});
