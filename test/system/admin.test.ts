/**
 * The operator API (docs/operations.md#the-operator-api): admin authentication, validated bodies, and run-time TTL
 * overrides, purges, revocations and blocks that take effect on every replica by their
 * announcements (the replicas' next poll of the operator state is a minute away, so nothing else
 * could bring them in time; how long it takes is the figures' business, not an assertion's),
 * pages already cached included; a replica started later sees them. Two proxy apps in one
 * process (with an injected clock) and two proxy processes (`node dist/main.js`), each pair on
 * one real Redis; and what a change does while Redis is down.
 */

import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProxyApp } from '../../src/app.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { configWith, DEV_KEYS, type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import {
  type Replica,
  type ReplicaEnv,
  replicaConfig,
  startReplica,
  startReplicas,
  until,
} from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const ADMIN = 'an admin token for the tests';
const P = API_PREFIX;

/** `bearer: null` sends no Authorization header. */
function admin(
  base: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  bearer: string | null = ADMIN,
): Promise<RawResponse> {
  return send(base ?? '', path, {
    method,
    headers: [
      ...(bearer === null ? [] : [['Authorization', `Bearer ${bearer}`] as const]),
      ['Content-Type', 'application/json'],
    ],
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

function cacheStatus(res: RawResponse): string {
  return res.headers['cache-status'] ?? '';
}

/** The replicas' poll of the operator state (`control.syncInterval`, s): longer than any wait here. */
const POLL_SECONDS = 60;
/** How long a test waits for an announced change to show on another replica. */
const ANNOUNCED_WAIT_MS = 10_000;

describe('admin authentication and validation', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  beforeAll(async () => {
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, adminToken: ADMIN });
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it.each([
    ['no token', null, 401],
    ['a wrong token', 'not the admin token', 401],
    ['the right token', ADMIN, 200],
  ])('%s', async (_label, bearer, status) => {
    const res = await admin(proxy.adminUrl, 'GET', '/admin/config', undefined, bearer);
    expect(res.status).toBe(status);
    if (status === 401) expect((res.json() as { code: string }).code).toBe('unauthenticated');
  });

  it('shows the effective settings, overrides marked', async () => {
    await admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/receipts', { ttl: 7 });
    const config = (await admin(proxy.adminUrl, 'GET', '/admin/config')).json() as {
      cache: { effective: Record<string, { ttl: number; override?: unknown }> };
    };
    expect(config.cache.effective.receipts).toMatchObject({ ttl: 7, override: { ttl: 7 } });
    expect(config.cache.effective.warehouses?.override).toBeUndefined();
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/cache/ttl/receipts')).status).toBe(204);
  });

  it('turns automatic lifetimes on and off at run time', async () => {
    const effective = async (): Promise<{ ttl: number; autoTtl?: unknown; override?: unknown } | undefined> =>
      (
        (await admin(proxy.adminUrl, 'GET', '/admin/config')).json() as {
          cache: { effective: Record<string, { ttl: number; autoTtl?: unknown; override?: unknown }> };
        }
      ).cache.effective.transfers;
    expect(
      (await admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/transfers', { autoTtl: { min: 2, max: 120 } })).status,
    ).toBe(200);
    expect(await effective()).toMatchObject({
      autoTtl: { min: 2, max: 120 },
      override: { autoTtl: { min: 2, max: 120 } },
    });
    expect((await admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/transfers', { autoTtl: null })).status).toBe(200);
    expect((await effective())?.autoTtl).toBeUndefined();
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/cache/ttl/transfers')).status).toBe(204);
  });

  it.each([
    ['an unknown field', 'PUT', '/admin/cache/ttl/receipts', { tll: 5 }, '#/tll'],
    ['a negative ttl', 'PUT', '/admin/cache/ttl/receipts', { ttl: -1 }, '#/ttl'],
    ['a fractional ttl', 'PUT', '/admin/cache/ttl/receipts', { staleIfError: 1.5 }, '#/staleIfError'],
    ['an empty override', 'PUT', '/admin/cache/ttl/receipts', {}, '#'],
    [
      'automatic lifetimes whose min exceeds max',
      'PUT',
      '/admin/cache/ttl/receipts',
      { autoTtl: { min: 9, max: 3 } },
      '#/autoTtl/max',
    ],
    [
      'automatic lifetimes of 0 s',
      'PUT',
      '/admin/cache/ttl/receipts',
      { autoTtl: { min: 0, max: 3 } },
      '#/autoTtl/min',
    ],
    ['a body that is not JSON', 'PUT', '/admin/cache/ttl/receipts', '{nope', '#'],
    ['a body that is not an object', 'PUT', '/admin/cache/ttl/receipts', '[5]', '#'],
    ['a bad company', 'POST', '/admin/cache/purge', { company_id: 'a b' }, '#/company_id'],
    ['a company of zero', 'POST', '/admin/cache/purge', { company_id: 0 }, '#/company_id'],
    ['no company', 'POST', '/admin/cache/purge', { resource: 'receipts' }, '#/company_id'],
    ['an unknown purge field', 'POST', '/admin/cache/purge', { company_id: 1, everything: true }, '#/everything'],
    ['a member name with a slash', 'POST', '/admin/cache/purge', { company_id: 1, 'a/b': true }, '#/a~1b'],
    ['an invalidation of no company', 'POST', '/admin/cache/invalidate', { resource: 'receipts' }, '#/company_id'],
    [
      'an unknown resource to invalidate',
      'POST',
      '/admin/cache/invalidate',
      { company_id: 1, resource: 'widgets' },
      '#/resource',
    ],
    [
      'a record id of zero',
      'POST',
      '/admin/cache/invalidate',
      { company_id: 1, resource: 'receipts', ids: [0] },
      '#/ids/0',
    ],
    [
      'a record id with a leading zero',
      'POST',
      '/admin/cache/invalidate',
      { company_id: 1, resource: 'receipts', ids: ['07'] },
      '#/ids/0',
    ],
    [
      'no record ids at all',
      'POST',
      '/admin/cache/invalidate',
      { company_id: 1, resource: 'receipts', ids: [] },
      '#/ids',
    ],
    ['record ids without their resource', 'POST', '/admin/cache/invalidate', { company_id: 1, ids: [5] }, '#/ids'],
    ['an empty batch', 'POST', '/admin/cache/invalidate', { changes: [] }, '#/changes'],
    [
      'a batch of 501',
      'POST',
      '/admin/cache/invalidate',
      { changes: Array.from({ length: 501 }, () => ({ company_id: 1 })) },
      '#/changes',
    ],
    [
      'a bad change in a batch',
      'POST',
      '/admin/cache/invalidate',
      { changes: [{ company_id: 1 }, { company_id: 'a b' }] },
      '#/changes/1/company_id',
    ],
  ])(
    'refuses %s with 400 invalid_body pointing at the member (RFC 9457 §3)',
    async (_label, method, path, body, pointer) => {
      const res = await admin(proxy.adminUrl, method, path, body);
      expect(res.status).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_body', pointer });
    },
  );

  it.each([
    ['text/plain', 'ttl=5'],
    ['application/x-www-form-urlencoded', 'ttl=5'],
  ])('refuses a body sent as %s with 415 unsupported_media_type', async (contentType, body) => {
    const res = await send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', {
      method: 'PUT',
      headers: [
        ['Authorization', `Bearer ${ADMIN}`],
        ['Content-Type', contentType],
      ],
      body,
    });
    expect(res.status).toBe(415);
    expect(res.json()).toMatchObject({ code: 'unsupported_media_type' });
  });

  it('lists the TTL overrides in force', async () => {
    expect((await admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/stocktakes', { ttl: 4, notFoundTtl: 2 })).status).toBe(
      200,
    );
    const listed = await admin(proxy.adminUrl, 'GET', '/admin/cache/ttl');
    expect(listed.status).toBe(200);
    expect(listed.json()).toEqual({ overrides: { stocktakes: { ttl: 4, notFoundTtl: 2 } } });
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/cache/ttl/stocktakes')).status).toBe(204);
    expect((await admin(proxy.adminUrl, 'GET', '/admin/cache/ttl')).json()).toEqual({ overrides: {} });
  });

  it('lists revocations and blocks a page at a time, and ends a revocation by DELETE', async () => {
    const exp = Math.floor(Date.now() / 1000) + 3_600;
    for (const jti of ['list-a', 'list-b', 'list-c'])
      expect((await admin(proxy.adminUrl, 'POST', '/admin/revocations', { jti, exp })).status).toBe(201);
    expect((await admin(proxy.adminUrl, 'POST', '/admin/revocations', { sub: 'list-sub' })).status).toBe(201);
    const first = await admin(proxy.adminUrl, 'GET', '/admin/revocations?limit=2');
    expect(first.status).toBe(200);
    const one = first.json() as { items: unknown[]; next: string | null };
    expect(one.items).toEqual([
      { kind: 'jti', id: 'list-a', exp },
      { kind: 'jti', id: 'list-b', exp },
    ]);
    expect(one.next).not.toBeNull();
    const two = (await admin(proxy.adminUrl, 'GET', `/admin/revocations?limit=2&after=${one.next ?? ''}`)).json() as {
      items: unknown[];
      next: string | null;
    };
    expect(two).toEqual({
      items: [
        { kind: 'jti', id: 'list-c', exp },
        { kind: 'sub', id: 'list-sub' },
      ],
      next: null,
    });
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/revocations/jti/list-b')).status).toBe(204);
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/revocations/sub/list-sub')).status).toBe(204);
    expect(
      ((await admin(proxy.adminUrl, 'GET', '/admin/revocations')).json() as { items: Array<{ id: string }> }).items.map(
        (r) => r.id,
      ),
    ).toEqual(['list-a', 'list-c']);
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/revocations/token/x')).status).toBe(404);
    expect((await admin(proxy.adminUrl, 'GET', '/admin/revocations?limit=0')).json()).toMatchObject({
      code: 'invalid_parameter',
      parameter: 'limit',
    });
    expect((await admin(proxy.adminUrl, 'GET', '/admin/revocations?after=%00')).json()).toMatchObject({
      code: 'invalid_parameter',
      parameter: 'after',
    });

    expect((await admin(proxy.adminUrl, 'PUT', '/admin/blocks/companies/44')).status).toBe(200);
    expect((await admin(proxy.adminUrl, 'PUT', '/admin/blocks/employees/44/7')).status).toBe(200);
    expect((await admin(proxy.adminUrl, 'GET', '/admin/blocks')).json()).toEqual({
      items: [
        { kind: 'company', company_id: '44' },
        { kind: 'employee', company_id: '44', employee_id: '7' },
      ],
      next: null,
    });
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/blocks/companies/44')).status).toBe(204);
    expect((await admin(proxy.adminUrl, 'DELETE', '/admin/blocks/employees/44/7')).status).toBe(204);
    expect((await admin(proxy.adminUrl, 'GET', '/admin/blocks')).json()).toEqual({ items: [], next: null });
  });

  it('answers 404 for an unknown resource', async () => {
    expect((await admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/widgets', { ttl: 5 })).status).toBe(404);
    expect(
      (await admin(proxy.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1, resource: 'widgets' })).status,
    ).toBe(404);
  });

  it('without ADMIN_TOKEN only health and readiness exist', async () => {
    const plain = await createProxyApp({
      upstreamUrl: sandbox.url,
      keys: DEV_KEYS,
      config: configWith({}),
      logger: pino({ level: 'silent' }),
    });
    const { adminPort } = await plain.listen({ port: 0, host: '127.0.0.1', adminPort: 0 });
    const base = `http://127.0.0.1:${String(adminPort)}`;
    try {
      expect((await send(base, '/healthz')).status).toBe(200);
      expect((await send(base, '/readyz')).status).toBe(200);
      expect((await admin(base, 'GET', '/admin/config')).status).toBe(404);
      expect((await admin(base, 'POST', '/admin/cache/purge', { company_id: 1 })).status).toBe(404);
    } finally {
      await plain.close();
    }
  });
});

describe('run-time settings on every replica (Redis)', () => {
  let redis: RedisServer;
  let sandbox: Sandbox;
  let one: ProxyHandle;
  let two: ProxyHandle;
  let clock = Date.now();
  let bearer: string;

  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    sandbox = await startSandbox();
    const replica = () =>
      startProxy({
        upstreamUrl: sandbox.url,
        redisUrl: redis.url,
        adminToken: ADMIN,
        now: () => clock,
        // The next poll of the operator state a minute away: a change reaches the other replica
        // by its announcement, or not within the test (docs/operations.md, "How it is shared").
        config: {
          cache: { defaults: { ttl: 30, staleWhileRevalidate: 0, staleIfError: 600, notFoundTtl: 10 } },
          control: { syncInterval: POLL_SECONDS },
        },
      });
    one = await replica();
    two = await replica();
    bearer = await token();
  });
  afterAll(async () => {
    await one.close();
    await two.close();
    await sandbox.close();
    await redis.stop();
  });

  it('a TTL override made on replica 1 applies on replica 2 by its announcement, to pages it already holds', async () => {
    const target = `${P}/warehouses?per_page=4`;
    await getWithToken(two.url, target, bearer);
    expect(cacheStatus(await getWithToken(two.url, target, bearer))).toMatch(/^slab-proxy; hit; ttl=300/);
    clock += 10_000;
    expect((await admin(one.adminUrl, 'PUT', '/admin/cache/ttl/warehouses', { ttl: 5 })).status).toBe(200);
    // Stale under the new TTL: forwarded to be revalidated (docs/cache.md#revalidation).
    await until(
      async () => /fwd=stale; fwd-status=304; stored/.test(cacheStatus(await getWithToken(two.url, target, bearer))),
      'replica 2 to apply the override',
      ANNOUNCED_WAIT_MS,
    );
    // A replica that starts later reads the overrides at start.
    const late = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, adminToken: ADMIN });
    try {
      const config = (await admin(late.adminUrl, 'GET', '/admin/config')).json() as {
        cache: { effective: Record<string, { ttl: number }> };
      };
      expect(config.cache.effective.warehouses?.ttl).toBe(5);
    } finally {
      await late.close();
    }
    expect((await admin(one.adminUrl, 'DELETE', '/admin/cache/ttl/warehouses')).status).toBe(204);
    await until(
      async () => {
        const config = (await admin(two.adminUrl, 'GET', '/admin/config')).json() as {
          cache: { effective: Record<string, { ttl: number }> };
        };
        return config.cache.effective.warehouses?.ttl === 300;
      },
      'replica 2 to drop the override',
      ANNOUNCED_WAIT_MS,
    );
  });

  it('a revocation made on replica 1 refuses the token on replica 2 by its announcement, on a page it holds', async () => {
    const target = `${P}/quote-links?per_page=3`;
    const byJti = await token({ subject: 'revoke-me', tokenId: 'jti-revoke-me' });
    const bySub = await token({ subject: 'revoke-sub' });
    for (const t of [byJti, bySub]) {
      await getWithToken(two.url, target, t);
      expect(cacheStatus(await getWithToken(two.url, target, t))).toMatch(/^slab-proxy; hit/);
    }
    expect((await admin(one.adminUrl, 'POST', '/admin/revocations', { jti: 'jti-revoke-me' })).status).toBe(201);
    expect((await admin(one.adminUrl, 'POST', '/admin/revocations', { sub: 'revoke-sub' })).status).toBe(201);
    for (const t of [byJti, bySub]) {
      await until(
        async () => (await getWithToken(two.url, target, t)).status === 401,
        'replica 2 to refuse the revoked token',
        ANNOUNCED_WAIT_MS,
      );
    }
    expect((await getWithToken(two.url, target, bearer)).status).toBe(200); // others are untouched
    // A replica that starts later knows the revocations.
    const late = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, adminToken: ADMIN });
    try {
      expect((await getWithToken(late.url, target, byJti)).status).toBe(401);
    } finally {
      await late.close();
    }
  });

  it('refuses a revocation of a token that has already expired (it would do nothing), and keeps the live one', async () => {
    const now = Math.floor(clock / 1000);
    expect(
      (await admin(one.adminUrl, 'POST', '/admin/revocations', { jti: 'live-jti', exp: now + 3_600 })).status,
    ).toBe(201);
    const lapsed = await admin(one.adminUrl, 'POST', '/admin/revocations', { jti: 'lapsed-jti', exp: now - 5 });
    expect(lapsed.status).toBe(400);
    expect(lapsed.json()).toMatchObject({ code: 'invalid_body', pointer: '#/exp' });
    const listed = (await admin(two.adminUrl, 'GET', '/admin/revocations')).json() as { items: Array<{ id: string }> };
    expect(listed.items.map((r) => r.id)).toContain('live-jti');
    expect(listed.items.map((r) => r.id)).not.toContain('lapsed-jti');
  });

  it('company and employee blocks made on replica 1 answer 403 on replica 2 by their announcements, and lift', async () => {
    const target = `${P}/fulfilments?per_page=3`;
    const companyThree = await token({ company: 3 });
    const employee = await token({ employee: 9, employeePermissions: ['view_slab', 'view_slab_fulfilment'] });
    await getWithToken(two.url, target, companyThree);
    await getWithToken(two.url, target, employee);
    expect((await admin(one.adminUrl, 'PUT', '/admin/blocks/companies/3')).status).toBe(200);
    expect((await admin(one.adminUrl, 'PUT', '/admin/blocks/employees/1/9')).status).toBe(200);
    await until(
      async () => (await getWithToken(two.url, target, companyThree)).status === 403,
      'the company block on replica 2',
      ANNOUNCED_WAIT_MS,
    );
    expect((await getWithToken(two.url, target, companyThree)).json()).toMatchObject({
      code: 'forbidden',
      reason: 'company',
    });
    await until(
      async () => (await getWithToken(two.url, target, employee)).status === 403,
      'the employee block on replica 2',
      ANNOUNCED_WAIT_MS,
    );
    expect((await getWithToken(two.url, target, employee)).json()).toMatchObject({
      code: 'forbidden',
      reason: 'employee',
    });
    expect((await getWithToken(two.url, target, bearer)).status).toBe(200);
    expect((await admin(one.adminUrl, 'DELETE', '/admin/blocks/companies/3')).status).toBe(204);
    expect((await admin(one.adminUrl, 'DELETE', '/admin/blocks/employees/1/9')).status).toBe(204);
    await until(
      async () => (await getWithToken(two.url, target, companyThree)).status === 200,
      'the company block to lift',
      ANNOUNCED_WAIT_MS,
    );
    await until(
      async () => (await getWithToken(two.url, target, employee)).status === 200,
      'the employee block to lift',
      ANNOUNCED_WAIT_MS,
    );
  });

  it.each([
    ['both jti and sub', { jti: 'a', sub: 'b' }, '#/sub'],
    ['neither', {}, '#/jti'],
    ['an unknown field', { jti: 'a', why: 'leaked' }, '#/why'],
    ['a bad exp', { jti: 'a', exp: 'soon' }, '#/exp'],
    ['an empty sub', { sub: '' }, '#/sub'],
  ])('refuses a revocation with %s', async (_label, body, pointer) => {
    const res = await admin(one.adminUrl, 'POST', '/admin/revocations', body);
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_body', pointer });
  });

  it('a purge made on replica 1 makes the next request on replica 2 a miss, its in-process copy included', async () => {
    const target = `${P}/remnants?per_page=4`;
    await getWithToken(two.url, target, bearer);
    expect(cacheStatus(await getWithToken(two.url, target, bearer))).toMatch(/^slab-proxy; hit/); // in its L1 now
    const purged = await admin(one.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1, resource: 'remnants' });
    expect(purged.status).toBe(200);
    expect(purged.json()).toMatchObject({ company_id: '1', resource: 'remnants', purged: true });
    await until(
      async () => /fwd=miss/.test(cacheStatus(await getWithToken(two.url, target, bearer))),
      'replica 2 to miss after the purge',
      ANNOUNCED_WAIT_MS,
    );
    // Another company's pages were not purged.
    const other = await token({ company: 2 });
    await getWithToken(two.url, target, other);
    await admin(one.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1 });
    expect(cacheStatus(await getWithToken(two.url, target, other))).toMatch(/^slab-proxy; hit/);
  });

  it('an invalidation made on replica 1 makes replica 2 revalidate its copy, its in-process copy included', async () => {
    const target = `${P}/stocktakes?per_page=4`;
    const record = `${P}/stocktakes/1`;
    for (const path of [target, record]) {
      await getWithToken(two.url, path, bearer);
      expect(cacheStatus(await getWithToken(two.url, path, bearer))).toMatch(/^slab-proxy; hit/); // in its L1 now
    }
    const taken = await admin(one.adminUrl, 'POST', '/admin/cache/invalidate', {
      changes: [{ company_id: 1, resource: 'stocktakes', ids: [2, '3'] }],
    });
    expect(taken.status).toBe(200);
    expect(taken.json()).toEqual({ invalidated: 1, changes: 1 });
    // The list may show records 2 and 3: stale, and (this policy has no stale-while-revalidate)
    // refreshed before it is served: a conditional request, answered 304 (nothing changed upstream).
    // Replica 2 learns of it by its announcement, after replica 1 has answered: until then its
    // in-process copy is a hit (docs/cache.md#soft-invalidation, "Every replica at once").
    let status = '';
    await until(
      async () => {
        status = cacheStatus(await getWithToken(two.url, target, bearer));
        return !/^slab-proxy; hit/.test(status);
      },
      'the invalidation announced to replica 2',
      ANNOUNCED_WAIT_MS,
    );
    expect(status).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    // Record 1 was not named: still a hit.
    expect(cacheStatus(await getWithToken(two.url, record, bearer))).toMatch(/^slab-proxy; hit; ttl=\d+$/);
  });
});

describe('with Redis down', () => {
  let redis: RedisServer;
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    sandbox = await startSandbox();
    // Reads fail open to the upstream while Redis is down (the budget's opt-out): a token is
    // served until it is revoked here.
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      adminToken: ADMIN,
      config: { upstream: { budgetCutOff: 'share' } },
    });
    await redis.kill();
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
    await redis.stop();
  });

  it('applies each change on this replica and answers 503 shared_state_unavailable (never a 500): the others did not get it', async () => {
    const unshared = async (res: Promise<RawResponse>): Promise<void> => {
      const answer = await res;
      expect(answer.status).toBe(503);
      expect(answer.json()).toMatchObject({ code: 'shared_state_unavailable' });
      expect(answer.headers['retry-after']).toBe('1');
    };
    await unshared(admin(proxy.adminUrl, 'PUT', '/admin/cache/ttl/receipts', { ttl: 3 }));
    const config = (await admin(proxy.adminUrl, 'GET', '/admin/config')).json() as {
      cache: { effective: Record<string, { ttl: number }> };
    };
    expect(config.cache.effective.receipts?.ttl).toBe(3);
    await unshared(admin(proxy.adminUrl, 'DELETE', '/admin/cache/ttl/receipts'));

    const leaked = await token({ subject: 'leaked-while-redis-down' });
    expect((await getWithToken(proxy.url, `${P}/receipts?per_page=2`, leaked)).status).toBe(200);
    await unshared(admin(proxy.adminUrl, 'POST', '/admin/revocations', { sub: 'leaked-while-redis-down' }));
    expect((await getWithToken(proxy.url, `${P}/receipts?per_page=2`, leaked)).status).toBe(401);

    await unshared(admin(proxy.adminUrl, 'PUT', '/admin/blocks/companies/5'));
    expect((await getWithToken(proxy.url, `${P}/receipts?per_page=2`, await token({ company: 5 }))).status).toBe(403);
    await unshared(admin(proxy.adminUrl, 'PUT', '/admin/blocks/employees/1/4'));
    await unshared(admin(proxy.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1 }));
    await unshared(
      admin(proxy.adminUrl, 'POST', '/admin/cache/invalidate', { company_id: 1, resource: 'receipts', ids: [3] }),
    );
  });
});

describe('two proxy processes sharing Redis', () => {
  const secret = 'admin across processes: a secret of at least thirty-two bytes';
  let redis: RedisServer;
  let sandbox: Sandbox;
  let replicas: Replica[] = [];
  let env: Omit<ReplicaEnv, 'CONFIG_FILE'>;
  // The next poll a minute away, as above: a change on replica 2 is its announcement's doing.
  const config = `cache:\n  defaults: { ttl: 30, staleWhileRevalidate: 0, staleIfError: 600, notFoundTtl: 10 }\ncontrol: { syncInterval: ${String(POLL_SECONDS)} }\n`;

  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    env = { UPSTREAM_URL: sandbox.url, REDIS_URL: redis.url, JWT_SECRET: secret, ADMIN_TOKEN: ADMIN };
    replicas = await startReplicas(2, env, config);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox.close();
    await redis.stop();
  });

  const reader = (claims: { company?: number; subject?: string; tokenId?: string } = {}): Promise<string> =>
    mintDevToken({
      company: claims.company ?? 1,
      secret,
      ...(claims.subject !== undefined && { subject: claims.subject }),
      ...(claims.tokenId !== undefined && { tokenId: claims.tokenId }),
    });

  /** Replica 2 holds the page: fetched once, then a hit. */
  async function held(replica: Replica, target: string, bearer: string): Promise<void> {
    await getWithToken(replica.url, target, bearer);
    expect(cacheStatus(await getWithToken(replica.url, target, bearer))).toMatch(/^slab-proxy; hit/);
  }

  /** Replica 2 shows the change: its announcement's doing, the next poll being a minute away. */
  async function announced(condition: () => Promise<boolean>, what: string): Promise<void> {
    await until(condition, what, ANNOUNCED_WAIT_MS);
  }

  it('a TTL override made through replica 1 applies on replica 2 by its announcement, to a page it holds; a replica started later has it', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const bearer = await reader();
    const target = `${P}/receipts?per_page=11`;
    await held(two, target, bearer);
    expect((await admin(one.adminUrl, 'PUT', '/admin/cache/ttl/receipts', { ttl: 600 })).status).toBe(200);
    // Still a hit (the same cached page), now fresh for the new ttl.
    await announced(
      async () => /^slab-proxy; hit; ttl=59\d$/.test(cacheStatus(await getWithToken(two.url, target, bearer))),
      'replica 2 to apply the override',
    );
    const late = await startReplica({ ...env, CONFIG_FILE: replicaConfig(config) });
    try {
      const effective = (await admin(late.adminUrl, 'GET', '/admin/config')).json() as {
        cache: { effective: Record<string, { ttl: number; override?: unknown }> };
      };
      expect(effective.cache.effective.receipts).toMatchObject({ ttl: 600, override: { ttl: 600 } });
      expect(cacheStatus(await getWithToken(late.url, target, bearer))).toMatch(/^slab-proxy; hit; ttl=59\d$/);
    } finally {
      await late.process.stop('SIGKILL');
    }
    expect((await admin(one.adminUrl, 'DELETE', '/admin/cache/ttl/receipts')).status).toBe(204);
    await announced(
      async () => /^slab-proxy; hit; ttl=(2\d|30)$/.test(cacheStatus(await getWithToken(two.url, target, bearer))),
      'replica 2 to drop the override',
    );
  });

  it('a purge made through replica 1 makes the next request on replica 2 a miss once announced, its in-process copy included', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const bearer = await reader();
    const target = `${P}/remnants?per_page=12`;
    await held(two, target, bearer);
    expect(
      (await admin(one.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1, resource: 'remnants' })).status,
    ).toBe(200);
    await announced(
      async () => /fwd=miss/.test(cacheStatus(await getWithToken(two.url, target, bearer))),
      'replica 2 to miss after the purge',
    );
  });

  it('a revocation made through replica 1 refuses the token on replica 2 by its announcement, on a page it holds', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const revoked = await reader({ subject: 'processes-revoked', tokenId: 'processes-jti' });
    const other = await reader({ subject: 'processes-other' });
    const target = `${P}/stocktakes?per_page=13`;
    await held(two, target, revoked);
    expect((await admin(one.adminUrl, 'POST', '/admin/revocations', { jti: 'processes-jti' })).status).toBe(201);
    await announced(
      async () => (await getWithToken(two.url, target, revoked)).status === 401,
      'replica 2 to refuse the revoked token',
    );
    expect((await getWithToken(two.url, target, revoked)).json()).toMatchObject({ code: 'unauthenticated' });
    expect((await getWithToken(two.url, target, other)).status).toBe(200);
  });

  it('a company block made through replica 1 answers 403 company on replica 2 by its announcement, on a page it holds, and lifts', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const blocked = await reader({ company: 6 });
    const target = `${P}/fulfilments?per_page=14`;
    await held(two, target, blocked);
    expect((await admin(one.adminUrl, 'PUT', '/admin/blocks/companies/6')).status).toBe(200);
    await announced(
      async () => (await getWithToken(two.url, target, blocked)).status === 403,
      'replica 2 to block the company',
    );
    expect((await getWithToken(two.url, target, blocked)).json()).toMatchObject({
      code: 'forbidden',
      reason: 'company',
    });
    expect((await admin(one.adminUrl, 'DELETE', '/admin/blocks/companies/6')).status).toBe(204);
    await announced(
      async () => (await getWithToken(two.url, target, blocked)).status === 200,
      'replica 2 to lift the block',
    );
  });
});
