/**
 * Revalidation with the upstream end to end (docs/cache.md#revalidation): the real sandbox over HTTP
 * with its validators (docs/sandbox.md), the real proxy in front of it on both stores (the
 * in-process one, and Redis on a real redis-server). The sandbox counts what reached it and what it
 * sent back: conditional requests, 304s, body bytes. The proxy's clock is injected, so pages go
 * stale without waiting; the store's writes are counted with spies on the app's own store.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ResourceName } from '../../src/catalog/resources.js';
import type { SandboxRecord } from '../../src/sandbox/dataset.js';
import { API_PREFIX } from '../../src/sandbox/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox, upstreamCount } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { emptyCache, type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
/** 10 s fresh, 20 s stale-while-revalidate, 100 s stale-if-error. */
const POLICY = {
  cache: {
    defaults: { ttl: 10, staleWhileRevalidate: 20, staleIfError: 100, notFoundTtl: 5 },
    resources: { warehouses: { ttl: 10 }, movements: { ttl: 10 } },
  },
};
/** Past freshness and stale-while-revalidate: the next request waits for the refresh. */
const PAST_SWR = 10_000 + 20_000 + 1;

const cacheStatus = (res: RawResponse): string => res.headers['cache-status'] ?? '';

describe('the sandbox’s validators, asked directly', () => {
  let sandbox: Sandbox;
  let bearer: string;
  beforeAll(async () => {
    sandbox = await startSandbox();
    bearer = await token();
  });
  afterAll(() => sandbox.close());
  beforeEach(async () => {
    sandbox.setValidators({ etag: true, lastModified: true });
    sandbox.resetStats();
  });

  const PAGE = `${P}/receipts?per_page=3`;

  it('sends a strong ETag and a Last-Modified with every page, and 304s a request that has it', async () => {
    const first = await getWithToken(sandbox.url, PAGE, bearer);
    expect(first.status).toBe(200);
    expect(first.headers.etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(Date.parse(first.headers['last-modified'] ?? '')).toBeLessThanOrEqual(Date.now());
    const etag = first.headers.etag ?? '';
    const lastModified = first.headers['last-modified'] ?? '';
    const conditional = async (headers: ReadonlyArray<readonly [string, string]>): Promise<RawResponse> =>
      getWithToken(sandbox.url, PAGE, bearer, { headers });
    // RFC 9110 §13.1.2: the weak comparison, in a list.
    for (const tag of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await conditional([['If-None-Match', tag]]);
      expect(res.status, tag).toBe(304);
      expect(res.body.length).toBe(0);
      expect(res.headers.etag).toBe(etag);
    }
    expect((await conditional([['If-None-Match', '"other"']])).status).toBe(200);
    // §13.1.3: not modified since a date at or after its last change.
    expect((await conditional([['If-Modified-Since', lastModified]])).status).toBe(304);
    expect((await conditional([['If-Modified-Since', new Date(Date.now() + 60_000).toUTCString()]])).status).toBe(304);
    expect((await conditional([['If-Modified-Since', 'Thu, 01 Jan 2015 00:00:00 GMT']])).status).toBe(200);
    expect((await conditional([['If-Modified-Since', 'not a date']])).status).toBe(200);
    // §13.2.2: If-None-Match decides when both are there.
    const both = await conditional([
      ['If-None-Match', '"other"'],
      ['If-Modified-Since', lastModified],
    ]);
    expect(both.status).toBe(200);
    const stats = sandbox.stats();
    expect(stats).toMatchObject({ served: 11, conditional: 10, notModified: 6 });
    expect(stats.bodyBytes).toBe(5 * first.body.length);
    expect(stats.responseBytes).toBeGreaterThan(stats.bodyBytes);
  });

  it('a page that changed has another ETag', async () => {
    const before = await getWithToken(sandbox.url, `${P}/remnants?per_page=2`, bearer);
    const records = changeFirstRecord(sandbox, 'remnants', 1);
    try {
      const after = await getWithToken(sandbox.url, `${P}/remnants?per_page=2`, bearer, {
        headers: [['If-None-Match', before.headers.etag ?? '']],
      });
      expect(after.status).toBe(200);
      expect(after.headers.etag).not.toBe(before.headers.etag);
    } finally {
      records.restore();
    }
  });

  it('sends no validators on an error, and evaluates no precondition for one', async () => {
    const missing = await getWithToken(sandbox.url, `${P}/receipts/999999999`, bearer, {
      headers: [['If-None-Match', '*']],
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.etag).toBeUndefined();
    expect(missing.headers['last-modified']).toBeUndefined();
  });

  it('switches each validator off and on over its control API; with both off it knows no conditional request', async () => {
    const first = await getWithToken(sandbox.url, PAGE, bearer);
    const off = await send(sandbox.url, '/__sandbox/validators', {
      method: 'PUT',
      body: JSON.stringify({ etag: false, lastModified: false }),
    });
    expect(off.status).toBe(200);
    expect(off.json()).toEqual({ etag: false, lastModified: false });
    const plain = await getWithToken(sandbox.url, PAGE, bearer, {
      headers: [
        ['If-None-Match', first.headers.etag ?? ''],
        ['If-Modified-Since', first.headers['last-modified'] ?? ''],
      ],
    });
    expect(plain.status).toBe(200);
    expect(plain.headers.etag).toBeUndefined();
    expect(plain.headers['last-modified']).toBeUndefined();
    expect(plain.body.equals(first.body)).toBe(true);
    // Last-Modified alone: the 304 carries it, as it has no ETag (RFC 9110 §15.4.5).
    await send(sandbox.url, '/__sandbox/validators', { method: 'PUT', body: '{"lastModified": true}' });
    expect((await send(sandbox.url, '/__sandbox/validators')).json()).toEqual({ etag: false, lastModified: true });
    const dated = await getWithToken(sandbox.url, PAGE, bearer, {
      headers: [['If-Modified-Since', first.headers['last-modified'] ?? '']],
    });
    expect(dated.status).toBe(304);
    expect(dated.headers['last-modified']).toBe(first.headers['last-modified']);
    expect(dated.headers.etag).toBeUndefined();
    for (const bad of ['[]', '{"etag": "yes"}', '{"weak": true}', 'nope']) {
      expect((await send(sandbox.url, '/__sandbox/validators', { method: 'PUT', body: bad })).status, bad).toBe(400);
    }
  });
});

/** Replaces the first record of company 1 in `resource` by a changed copy; `restore` puts it back. */
function changeFirstRecord(sandbox: Sandbox, resource: ResourceName, company: number): { restore(): void } {
  const dataset = sandbox.dataset as Map<ResourceName, readonly SandboxRecord[]>;
  const records = dataset.get(resource) ?? [];
  const index = records.findIndex((r) => r.company_id === company);
  const original = records[index];
  if (original === undefined) throw new Error(`no ${resource} of company ${String(company)}`);
  const changed = [...records];
  changed[index] = { ...original, revalidation_note: 'changed upstream' };
  dataset.set(resource, changed);
  return { restore: () => dataset.set(resource, records) };
}

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
});
afterAll(() => redis.stop());

describe.each(['memory', 'redis'] as const)('revalidation through the proxy, on the %s store', (storeKind) => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let clock: number;
  let refreshes: Array<Promise<void>>;
  let bearer: string;
  let admin: Redis | undefined;

  beforeEach(async () => {
    if (storeKind === 'redis') {
      await emptyCache(redis.url);
      admin = new Redis(redis.url);
    }
    clock = Date.now();
    refreshes = [];
    sandbox = await startSandbox();
    bearer = await token();
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      config: POLICY,
      now: () => clock,
      onBackgroundRefresh: (settled) => refreshes.push(settled),
      ...(storeKind === 'redis' && { redisUrl: redis.url }),
    });
  });
  afterEach(async () => {
    await proxy.close();
    await sandbox.close();
    admin?.disconnect();
  });

  /** The store's writes of the app under test: whole entries saved, and entries freshened. */
  function storeWrites(): { saves: () => number; freshens: () => Promise<unknown[]> } {
    const save = vi.spyOn(proxy.app.store, 'save');
    const freshen = vi.spyOn(proxy.app.store, 'freshen');
    return {
      saves: () => save.mock.calls.length,
      freshens: () => Promise.all(freshen.mock.results.map((r) => r.value as Promise<unknown>)),
    };
  }

  /**
   * The commands Redis runs on the page's entry (scripts' own commands included), seen with MONITOR
   * while `during` runs: what the store really sent and wrote, whatever the app says.
   */
  async function entryCommands(during: () => Promise<void>): Promise<string[]> {
    if (admin === undefined) {
      await during();
      return [];
    }
    const seen: string[][] = [];
    const monitor = await admin.monitor();
    // MONITOR's stream runs behind the commands it shows: a marker sent after them is seen after them.
    const MARK = 'entry-commands-end';
    const marked = new Promise<void>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'echo' && args[1] === MARK) resolve();
        else seen.push(args);
      });
    });
    try {
      await during();
      await admin.echo(MARK);
      await marked;
    } finally {
      monitor.disconnect();
    }
    const entryKey = (await admin.keys('*:co:list:*')).find((key) => !key.endsWith(':lease'));
    return seen.filter((args) => args.includes(entryKey ?? '')).map((args) => (args[0] ?? '').toLowerCase());
  }

  it('a refresh answered 304: no body sent or stored, the entry fresh again, the client’s ETag unchanged', async () => {
    const target = `${P}/receipts?per_page=5`;
    const miss = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(miss)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    const writes = storeWrites();
    sandbox.resetStats();

    clock += PAST_SWR;
    let revalidated = miss;
    const commands = await entryCommands(async () => {
      revalidated = await getWithToken(proxy.url, target, bearer);
    });
    expect(cacheStatus(revalidated)).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    expect(revalidated.status).toBe(200);
    expect(revalidated.body.equals(miss.body)).toBe(true);
    expect(revalidated.headers.etag).toBe(miss.headers.etag);
    expect(revalidated.headers.age).toBe('0');
    // What reached the upstream and came back: one conditional request, one 304, no body.
    expect(sandbox.stats()).toMatchObject({ served: 1, conditional: 1, notModified: 1, bodyBytes: 0 });
    // What the store was given: a freshen, never the body again.
    expect(writes.saves()).toBe(0);
    expect(await writes.freshens()).toEqual(['freshened']);
    if (storeKind === 'redis') {
      // Read, then the freshen's script: the times written in place, the body neither sent nor set.
      expect(commands).toContain('setrange');
      expect(commands).toContain('pexpire');
      expect(commands).not.toContain('set');
    }

    clock += 4_000;
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(hit)).toBe('slab-proxy; hit; ttl=6');
    expect(hit.headers.etag).toBe(miss.headers.etag);
    expect(hit.body.equals(miss.body)).toBe(true);
    // A client's own validator still holds across the revalidation.
    const own = await getWithToken(proxy.url, target, bearer, {
      headers: [['If-None-Match', miss.headers.etag ?? '']],
    });
    expect(own.status).toBe(304);
    expect(own.body.length).toBe(0);
    expect(upstreamCount(sandbox, target)).toBe(1);
  });

  it('a background refresh (stale-while-revalidate) is conditional too, and its 304 freshens', async () => {
    const target = `${P}/warehouses?per_page=4`;
    const miss = await getWithToken(proxy.url, target, bearer);
    sandbox.resetStats();
    clock += 12_000;
    const stale = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(stale)).toBe('slab-proxy; hit; ttl=-2; detail=stale-while-revalidate');
    await Promise.all(refreshes);
    expect(sandbox.stats()).toMatchObject({ served: 1, conditional: 1, notModified: 1, bodyBytes: 0 });
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(hit)).toBe('slab-proxy; hit; ttl=10');
    expect(hit.headers.etag).toBe(miss.headers.etag);
  });

  it('an upstream that sends no validators: the refresh is a full 200, and the same body only freshens', async () => {
    sandbox.setValidators({ etag: false, lastModified: false });
    const target = `${P}/remnants?per_page=5`;
    const miss = await getWithToken(proxy.url, target, bearer);
    const writes = storeWrites();
    sandbox.resetStats();
    clock += PAST_SWR;
    let refreshed = miss;
    const commands = await entryCommands(async () => {
      refreshed = await getWithToken(proxy.url, target, bearer);
    });
    expect(cacheStatus(refreshed)).toBe('slab-proxy; fwd=stale; fwd-status=200; stored');
    expect(refreshed.body.equals(miss.body)).toBe(true);
    expect(refreshed.headers.etag).toBe(miss.headers.etag);
    expect(sandbox.stats()).toMatchObject({ served: 1, conditional: 0, notModified: 0, bodyBytes: miss.body.length });
    expect(writes.saves()).toBe(0);
    expect(await writes.freshens()).toEqual(['freshened']);
    if (storeKind === 'redis') expect(commands).toEqual(expect.arrayContaining(['setrange']));
    expect(commands).not.toContain('set');
    expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toBe('slab-proxy; hit; ttl=10');
  });

  it('Last-Modified alone: the refresh sends If-Modified-Since, and the 304 freshens', async () => {
    sandbox.setValidators({ etag: false, lastModified: true });
    const target = `${P}/stocktakes?per_page=3`;
    const miss = await getWithToken(proxy.url, target, bearer);
    sandbox.resetStats();
    clock += PAST_SWR;
    const refreshed = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(refreshed)).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    expect(refreshed.headers.etag).toBe(miss.headers.etag);
    expect(sandbox.stats()).toMatchObject({ served: 1, conditional: 1, notModified: 1, bodyBytes: 0 });
  });

  it('a page changed upstream: the conditional refresh gets a 200, and the new body is stored and served', async () => {
    const target = `${P}/transfers?per_page=3`;
    const miss = await getWithToken(proxy.url, target, bearer);
    const writes = storeWrites();
    const changed = changeFirstRecord(sandbox, 'transfers', 1);
    sandbox.resetStats();
    clock += PAST_SWR;
    const refreshed = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(refreshed)).toBe('slab-proxy; fwd=stale; fwd-status=200; stored');
    expect(refreshed.text).toContain('changed upstream');
    expect(refreshed.headers.etag).not.toBe(miss.headers.etag);
    expect(sandbox.stats()).toMatchObject({ served: 1, conditional: 1, notModified: 0 });
    expect(writes.saves()).toBe(1);
    expect(await writes.freshens()).toEqual([]);
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(hit)).toBe('slab-proxy; hit; ttl=10');
    expect(hit.body.equals(refreshed.body)).toBe(true);
    // The next refresh sends the new page's validators: 304 again.
    clock += PAST_SWR;
    expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toBe(
      'slab-proxy; fwd=stale; fwd-status=304; stored',
    );
    changed.restore();
  });

  it('a 304 to an unconditional request is an upstream error: a 502, nothing stored', async () => {
    const target = `${P}/fulfilments?per_page=2`;
    const writes = storeWrites();
    sandbox.faults.set({ status: 304, times: 1 });
    const answered = await getWithToken(proxy.url, target, bearer);
    expect(answered.status).toBe(502);
    expect((answered.json() as { code: string }).code).toBe('bad_gateway');
    expect(writes.saves()).toBe(0);
    const next = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(next)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
  });

  it('a 304 to a refresh sent without validators: the stale copy covers it, and the entry is not freshened', async () => {
    sandbox.setValidators({ etag: false, lastModified: false });
    const target = `${P}/quote-links?per_page=2`;
    await getWithToken(proxy.url, target, bearer);
    const writes = storeWrites();
    clock += PAST_SWR;
    sandbox.faults.set({ status: 304, times: 1 });
    const stale = await getWithToken(proxy.url, target, bearer);
    expect(stale.status).toBe(200);
    expect(cacheStatus(stale)).toBe('slab-proxy; fwd=stale; fwd-status=502; ttl=-21');
    expect(writes.saves()).toBe(0);
    expect(await writes.freshens()).toEqual([]);
    // Still stale: the next request refreshes it (a full 200, the same body: freshened).
    expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toBe(
      'slab-proxy; fwd=stale; fwd-status=200; stored',
    );
  });

  it('keeps no token or signature in a key or an entry', async () => {
    const save = vi.spyOn(proxy.app.store, 'save');
    const freshen = vi.spyOn(proxy.app.store, 'freshen');
    const target = `${P}/receipts?per_page=6`;
    await getWithToken(proxy.url, target, bearer);
    clock += PAST_SWR;
    await getWithToken(proxy.url, target, bearer);
    const signature = bearer.split('.')[2] ?? '';
    expect(signature.length).toBeGreaterThan(20);
    // What the app gave its store, on either store: the fill's save and the revalidation's write.
    const written = [...save.mock.calls, ...freshen.mock.calls];
    expect(written.length).toBeGreaterThanOrEqual(2);
    for (const [address, ...entries] of written) {
      expect(address.key).not.toContain(signature);
      const text = entries.map(entryText).join(' ');
      expect(text).toContain('next_after_id'); // the entry's own text is searched, its body included
      expect(text).not.toContain(signature);
      expect(text).not.toContain(bearer.slice(0, 30));
    }
    if (admin === undefined) return;
    // And what Redis holds, whatever the app says it wrote.
    for (const key of await admin.keys('*')) {
      expect(key).not.toContain(signature);
      const type = await admin.type(key);
      if (type !== 'string') continue;
      const value = (await admin.getBuffer(key))?.toString('latin1') ?? '';
      expect(value, key).not.toContain(signature);
      expect(value, key).not.toContain(bearer.slice(0, 30));
    }
  });
});

/** An entry as text, its buffers (the identity body among them) as latin1, to search. */
function entryText(entry: unknown): string {
  return JSON.stringify(entry, (_key, value: unknown) =>
    typeof value === 'object' && value !== null && 'type' in value && 'data' in value && value.type === 'Buffer'
      ? Buffer.from(value.data as number[]).toString('latin1')
      : value,
  );
}
