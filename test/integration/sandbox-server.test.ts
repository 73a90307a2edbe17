/**
 * The sandbox as a system of record in its own right: its 429 above the configured rate (passed
 * through the proxy with Retry-After), its control API over HTTP, that the control API does not
 * exist unless enabled, and its own reading of the seed's rules, asked directly (no proxy in front):
 * credentials (seed §5, §7), permissions, the query (seed §2, §4, §8) and company scoping.
 */
import { randomUUID } from 'node:crypto';
import { type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { API_PREFIX, SEED_RESOURCES } from '../../src/sandbox/resources.js';
import { NO_CACHE, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

describe('sandbox rate limit', () => {
  it('answers 429 with Retry-After above its rate, and the proxy passes it through', async () => {
    const sandbox = await startSandbox({ rateLimitPerSecond: 1 });
    const proxy = await startProxy({ upstreamUrl: sandbox.url, config: NO_CACHE });
    try {
      const bearer = await token();
      const answers = await Promise.all(
        // Twelve different pages: twelve upstream requests, none coalesced with another.
        Array.from({ length: 12 }, (_, i) =>
          getWithToken(proxy.url, `${API_PREFIX}/warehouses?per_page=${i + 1}`, bearer),
        ),
      );
      const limited = answers.filter((a) => a.status === 429);
      // One request per wall-clock second: 12 concurrent requests cannot span six seconds.
      expect(limited.length).toBeGreaterThanOrEqual(6);
      expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
      // The sandbox's own 429s pass through as it sent them; once one has come back, the proxy
      // pauses the company's upstream calls and answers the rest itself (docs/limits.md#the-upstream-guard).
      const fromUpstream = limited.filter((a) => a.headers['content-type'] === 'application/json');
      const fromProxy = limited.filter((a) => a.headers['content-type'] === 'application/problem+json');
      expect(fromUpstream.length + fromProxy.length).toBe(limited.length);
      expect(fromUpstream.length).toBeGreaterThan(0);
      for (const answer of fromUpstream) {
        expect(answer.headers['retry-after']).toBe('1');
        expect(answer.json()).toEqual({ error: 'rate_limited' });
      }
      for (const answer of fromProxy) expect(answer.json()).toMatchObject({ code: 'rate_limited', policy: 'upstream' });
      for (const answer of limited) expect(answer.headers['cache-control']).toBe('no-store');
      expect(sandbox.stats().rateLimited).toBe(fromUpstream.length);
    } finally {
      await proxy.close();
      await sandbox.close();
    }
  });
});

describe('sandbox control API', () => {
  let sandbox: Awaited<ReturnType<typeof startSandbox>>;
  let bearer: string;
  beforeAll(async () => {
    sandbox = await startSandbox();
    bearer = await token();
  });
  afterAll(() => sandbox.close());

  it('sets a fault for the next N requests of one resource, then clears itself', async () => {
    const put = await send(sandbox.url, '/__sandbox/faults', {
      method: 'PUT',
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify({ status: 503, resource: 'receipts', times: 2 }),
    });
    expect(put.status).toBe(200);
    expect((await getWithToken(sandbox.url, `${API_PREFIX}/warehouses`, bearer)).status).toBe(200);
    expect((await getWithToken(sandbox.url, `${API_PREFIX}/receipts`, bearer)).status).toBe(503);
    expect((await getWithToken(sandbox.url, `${API_PREFIX}/receipts`, bearer)).status).toBe(503);
    expect((await getWithToken(sandbox.url, `${API_PREFIX}/receipts`, bearer)).status).toBe(200);
  });

  it('counts what it served, per target, and resets', async () => {
    await send(sandbox.url, '/__sandbox/reset', { method: 'POST' });
    await getWithToken(sandbox.url, `${API_PREFIX}/receipts?per_page=2`, bearer);
    await getWithToken(sandbox.url, `${API_PREFIX}/receipts?per_page=2`, bearer);
    const stats = (await send(sandbox.url, '/__sandbox/stats')).json() as {
      served: number;
      byTarget: Record<string, number>;
    };
    expect(stats.served).toBe(2);
    expect(stats.byTarget[`${API_PREFIX}/receipts?per_page=2`]).toBe(2);
  });

  it.each([
    ['an unknown fault', { explode: true }],
    ['a bad status', { status: 99 }],
    ['a bad body fault', { body: 'weird' }],
    ['an unknown resource', { resource: 'widgets' }],
  ])('refuses %s with 400', async (_label, faults) => {
    const res = await send(sandbox.url, '/__sandbox/faults', { method: 'PUT', body: JSON.stringify(faults) });
    expect(res.status).toBe(400);
  });

  it('refuses connections while told to, then listens again on the same port', async () => {
    const refusing = sandbox.refuse(60_000);
    await expect(send(sandbox.url, `${API_PREFIX}/receipts`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    sandbox.accept();
    await refusing;
    expect((await getWithToken(sandbox.url, `${API_PREFIX}/receipts`, bearer)).status).toBe(200);
  });
});

describe('sandbox without control', () => {
  it('has no control API', async () => {
    const sandbox = await startSandbox({ control: false });
    try {
      expect((await send(sandbox.url, '/__sandbox/stats')).status).toBe(404);
      expect((await send(sandbox.url, '/__sandbox/faults', { method: 'PUT', body: '{"status":500}' })).status).toBe(
        404,
      );
    } finally {
      await sandbox.close();
    }
  });
});

describe('the sandbox’s own reading of the seed, asked directly', () => {
  let sandbox: Awaited<ReturnType<typeof startSandbox>>;
  let bearer: string;
  beforeAll(async () => {
    sandbox = await startSandbox();
    bearer = await token();
  });
  afterAll(() => sandbox.close());

  const EVERY_PERMISSION = [...new Set(SEED_RESOURCES.flatMap((r) => r.permissions))];
  const LIST = `${API_PREFIX}/receipts`;

  function claims(overrides: Record<string, unknown> = {}): JWTPayload {
    const now = Math.floor(Date.now() / 1000);
    return { company_id: 1, permissions: EVERY_PERMISSION, jti: randomUUID(), iat: now, exp: now + 600, ...overrides };
  }

  function without(payload: JWTPayload, claim: string): JWTPayload {
    const copy: Record<string, unknown> = { ...payload };
    delete copy[claim];
    return copy;
  }

  function sign(payload: JWTPayload, secret = DEV_SECRET): Promise<string> {
    return new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(secret));
  }

  function pageOf(body: unknown): { data: Array<{ id: number; company_id: unknown }>; meta: { per_page: number } } {
    return body as { data: Array<{ id: number; company_id: unknown }>; meta: { per_page: number } };
  }

  describe('credentials (seed §5.1, §7: missing, invalid or expired is 401)', () => {
    it.each<[string, () => Promise<ReadonlyArray<readonly [string, string]>>]>([
      ['no Authorization header', async () => []],
      ['another scheme', async () => [['Authorization', `Basic ${Buffer.from('a:b').toString('base64')}`]]],
      ['the Bearer scheme without a token', async () => [['Authorization', 'Bearer']]],
      [
        'two Authorization headers, both valid',
        async () => [
          ['Authorization', `Bearer ${await token()}`],
          ['Authorization', `Bearer ${await token()}`],
        ],
      ],
      [
        'a token signed with another secret',
        async () => [['Authorization', `Bearer ${await sign(claims(), 'x'.repeat(40))}`]],
      ],
      [
        'a token expired an hour ago',
        async () => [['Authorization', `Bearer ${await sign(claims({ exp: Math.floor(Date.now() / 1000) - 3600 }))}`]],
      ],
      ['a token without exp', async () => [['Authorization', `Bearer ${await sign(without(claims(), 'exp'))}`]]],
      ['no company_id', async () => [['Authorization', `Bearer ${await sign(without(claims(), 'company_id'))}`]]],
      ['company_id 0', async () => [['Authorization', `Bearer ${await sign(claims({ company_id: 0 }))}`]]],
      ['company_id "a b"', async () => [['Authorization', `Bearer ${await sign(claims({ company_id: 'a b' }))}`]]],
      [
        'permissions as a string',
        async () => [
          ['Authorization', `Bearer ${await sign(claims({ permissions: 'view_slab view_slab_logistics' }))}`],
        ],
      ],
      [
        'employee_id without employee_permissions',
        async () => [['Authorization', `Bearer ${await sign(claims({ employee_id: 7 }))}`]],
      ],
      ['scope as a number', async () => [['Authorization', `Bearer ${await sign(claims({ scope: 42 }))}`]]],
    ])('401 for %s', async (_label, headers) => {
      const res = await send(sandbox.url, LIST, { headers: await headers() });
      expect(res.status).toBe(401);
      expect(res.json()).toEqual({ error: 'unauthenticated' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer /);
    });

    it('reads the scheme in any case, and company_id 1 and "1" as one company', async () => {
      const asNumber = await send(sandbox.url, LIST, { headers: [['Authorization', `bEaReR ${await token()}`]] });
      const asText = await getWithToken(sandbox.url, LIST, await sign(claims({ company_id: '1' })));
      expect(asNumber.status).toBe(200);
      expect(asText.body.equals(asNumber.body)).toBe(true);
    });
  });

  describe('permissions (seed §5.3) and the token scope and plan modules (seed §7)', () => {
    it.each(SEED_RESOURCES.map((r) => ({ name: r.name, permissions: r.permissions })))(
      '$name: its own permissions are enough, and each one is needed, by the credential and by an employee',
      async ({ name, permissions }) => {
        const target = `${API_PREFIX}/${name}?per_page=1`;
        expect((await getWithToken(sandbox.url, target, await token({ permissions }))).status).toBe(200);
        for (const permission of permissions) {
          const rest = EVERY_PERMISSION.filter((p) => p !== permission);
          const lacking = await getWithToken(sandbox.url, target, await token({ permissions: rest }));
          expect(lacking.status).toBe(403);
          expect(lacking.json()).toEqual({ error: 'forbidden', reason: 'permission', missing: [permission] });
          const employee = await token({ employee: 7, employeePermissions: rest });
          const employeeLacking = await getWithToken(sandbox.url, target, employee);
          expect(employeeLacking.status).toBe(403);
          expect(employeeLacking.json()).toEqual({ error: 'forbidden', reason: 'employee', missing: [permission] });
        }
      },
    );

    it('needs view_slab and only view_slab for the inventory group (seed §5 table)', () => {
      for (const name of ['movements', 'remnants', 'warehouses'])
        expect(SEED_RESOURCES.find((r) => r.name === name)?.permissions).toEqual(['view_slab']);
    });

    it.each<[string, Parameters<typeof token>[0], number, unknown]>([
      ['a scope with operations:read', { scope: 'other operations:read' }, 200, undefined],
      ['a scope without it', { scope: 'operations:readwrite' }, 403, { reason: 'scope', missing: ['operations:read'] }],
      ['modules with slab', { modules: ['crm', 'slab'] }, 200, undefined],
      ['modules without slab', { modules: [] }, 403, { reason: 'module', missing: ['slab'] }],
    ])('%s', async (_label, options, status, body) => {
      const res = await getWithToken(sandbox.url, LIST, await token(options));
      expect(res.status).toBe(status);
      if (body !== undefined) expect(res.json()).toMatchObject({ error: 'forbidden', ...body });
    });
  });

  describe('the query (seed §2, §4, §8)', () => {
    it('pages 30 records without per_page, and up to 100 with it', async () => {
      const movements = `${API_PREFIX}/movements`;
      expect(pageOf((await getWithToken(sandbox.url, movements, bearer)).json()).data).toHaveLength(30);
      const full = pageOf((await getWithToken(sandbox.url, `${movements}?per_page=100`, bearer)).json());
      expect(full.data).toHaveLength(100);
      expect(full.meta.per_page).toBe(100);
    });

    it.each([
      ['per_page 0', `${LIST}?per_page=0`, 'per_page'],
      ['per_page 101', `${LIST}?per_page=101`, 'per_page'],
      ['per_page with a leading zero', `${LIST}?per_page=030`, 'per_page'],
      ['per_page as an exponent', `${LIST}?per_page=1e2`, 'per_page'],
      ['per_page with a sign', `${LIST}?per_page=%2B5`, 'per_page'],
      ['after_id negative', `${LIST}?after_id=-1`, 'after_id'],
      ['after_id beyond 2^53 - 1', `${LIST}?after_id=9007199254740992`, 'after_id'],
      ['an unknown name', `${LIST}?colour=red`, 'colour'],
      ['a filter of another resource', `${LIST}?status=open`, 'status'],
      ['a name given twice', `${LIST}?warehouse_id=1&warehouse_id=2`, 'warehouse_id'],
      ['a name given twice, once encoded', `${LIST}?per_page=5&per%5Fpage=5`, 'per_page'],
      ['an empty value', `${LIST}?shipment_id=`, 'shipment_id'],
      ['a parameter on a record', `${LIST}/5?per_page=5`, 'per_page'],
    ])('400 invalid_parameter for %s', async (_label, target, parameter) => {
      const res = await getWithToken(sandbox.url, target, bearer);
      expect(res.status).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid_parameter', parameter });
    });

    it('matches filter values as text: a value no record holds selects nothing', async () => {
      const res = await getWithToken(sandbox.url, `${LIST}?warehouse_id=abc`, bearer);
      expect(res.status).toBe(200);
      expect(pageOf(res.json()).data).toEqual([]);
    });

    it('addresses a record by its id as the API writes it, and only within the company (seed §4)', async () => {
      const receipts = sandbox.dataset.get('receipts') ?? [];
      const own = receipts.find((r) => r.company_id === 1);
      const other = receipts.find((r) => r.company_id === 2);
      if (own === undefined || other === undefined) throw new Error('no receipts for companies 1 and 2');
      expect((await getWithToken(sandbox.url, `${LIST}/${own.id}`, bearer)).status).toBe(200);
      for (const id of [`0${own.id}`, `${own.id}.0`, '0', String(other.id)]) {
        const res = await getWithToken(sandbox.url, `${LIST}/${id}`, bearer);
        expect(res.status, id).toBe(404);
        expect(res.json()).toEqual({ error: 'not_found' });
      }
    });

    it('lists only the credential’s company’s records (seed §5.2)', async () => {
      for (const company of SANDBOX_COMPANIES) {
        const res = await getWithToken(sandbox.url, `${LIST}?per_page=100`, await token({ company }));
        const data = pageOf(res.json()).data;
        expect(data.length).toBeGreaterThan(0);
        expect(data.every((r) => String(r.company_id) === String(company))).toBe(true);
      }
    });
  });
});
