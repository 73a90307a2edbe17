/**
 * The Redis store's own logic on ioredis-mock (pure store logic only; the contract suite runs it
 * against a real redis-server): the keys it reads and writes, and the generation rules.
 */
import RedisMock from 'ioredis-mock';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { cacheAddress } from '../../src/cache/entry/cache-key.js';
import { decodeEntry, strongEtag } from '../../src/cache/entry/entry.js';
import { createRedisStore } from '../../src/cache/stores/redis-store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import type { RedisClient } from '../../src/platform/redis/connection.js';
import { RedisHealth } from '../../src/platform/redis/health.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { testPrincipal } from '../helpers/principals.js';

const P: Principal = testPrincipal({ company: '3', subject: 'x', permissions: new Set(), expiresAt: 0 });

async function setup() {
  const mock = new RedisMock();
  await mock.flushall(); // ioredis-mock instances share one in-memory server
  // ioredis-mock mirrors ioredis's commands but not its connection state: it is always connected.
  const client = Object.assign(mock, { status: 'ready' }) as unknown as RedisClient;
  const store = createRedisStore({ client, health: new RedisHealth(client), prefix: 'unit', now: () => 1_000 });
  const read = canonicaliseTarget('/api/slab/v1/operations/remnants?status=available');
  if (read instanceof ProxyError) throw new Error(read.code);
  return { mock, store, address: cacheAddress('unit', read, P, 'company') };
}

describe('Redis store logic', () => {
  it('keeps the generation under the group key, and the entry under its own key with a PX ttl', async () => {
    const { mock, store, address } = await setup();
    const generation = await store.ensureGeneration(address);
    expect(await mock.get('unit:{3:remnants}:gen')).toBe(generation);
    const body = Buffer.from('{"data":[],"meta":{}}');
    await store.save(address, {
      status: 200,
      contentType: 'application/json',
      etag: strongEtag(body),
      body,
      storedAt: 1_000,
      freshUntil: 2_000,
      keepUntil: 61_000,
      generation: generation ?? '',
    });
    expect(address.key).toBe('unit:{3:remnants}:co:list:per_page=30&status=available');
    const raw = await mock.getBuffer(address.key);
    expect(raw === null ? undefined : decodeEntry(raw)?.body.equals(body)).toBe(true);
    const ttl = await mock.pttl(address.key);
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('never replaces an existing generation when ensuring one, and replaces it on purge', async () => {
    const { mock, store, address } = await setup();
    await mock.set('unit:{3:remnants}:gen', 'existing');
    expect(await store.ensureGeneration(address)).toBe('existing');
    const purged = await store.purge(address.group);
    expect(purged).not.toBe('existing');
    expect(await mock.get('unit:{3:remnants}:gen')).toBe(purged);
  });

  it('does not save an entry whose keepUntil has passed', async () => {
    const { mock, store, address } = await setup();
    const body = Buffer.from('{}');
    await store.save(address, {
      status: 200,
      contentType: 'application/json',
      etag: '"x"',
      body,
      storedAt: 0,
      freshUntil: 500,
      keepUntil: 900,
      generation: 'g',
    });
    expect(await mock.exists(address.key)).toBe(0);
  });
});
