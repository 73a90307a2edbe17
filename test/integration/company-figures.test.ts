/**
 * Per-company figures for operators (docs/operations.md#per-company-figures): `/admin/companies`
 * ranks the companies by requests with their cache results, hit ratio, upstream slots and the
 * bytes they hold in the in-process tier, the rest summed as `other`; its `top` is checked; the
 * metrics carry the same counts per company. Real proxy, real sandbox, real JWTs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';
import { token } from '../helpers/tokens.js';

const ADMIN_TOKEN = 'company-figures-admin-token-of-some-length';
const PAGES = [
  '/api/slab/v1/operations/receipts?per_page=3',
  '/api/slab/v1/operations/receipts?per_page=4',
  '/api/slab/v1/operations/movements?per_page=5',
];

interface Figures {
  readonly company?: string;
  readonly requests: number;
  readonly cache: Record<string, number>;
  readonly hitRatio: number | null;
  readonly upstreamSlots: { readonly granted: number; readonly refused: number; readonly waitedSeconds: number };
  readonly cacheBytes: number;
}
interface Listing {
  readonly companies: Figures[];
  readonly other: Figures;
  readonly tracked: number;
}

let sandbox: Sandbox;
let proxy: ProxyHandle;

beforeAll(async () => {
  sandbox = await startSandbox();
  proxy = await startProxy({ upstreamUrl: sandbox.url, adminToken: ADMIN_TOKEN });
  const first = await token({ company: 1 });
  const second = await token({ company: 2 });
  for (const round of [0, 1])
    for (const page of PAGES) expect((await getWithToken(proxy.url, page, first)).status, String(round)).toBe(200);
  expect((await getWithToken(proxy.url, PAGES[0] ?? '', second)).status).toBe(200);
  // Not authenticated: no company to count it for.
  expect((await send(proxy.url, PAGES[0] ?? '')).status).toBe(401);
});

afterAll(async () => {
  await proxy.close();
  await sandbox.close();
});

function companies(query = ''): ReturnType<typeof send> {
  return send(proxy.adminUrl ?? '', `/admin/companies${query}`, {
    headers: [['authorization', `Bearer ${ADMIN_TOKEN}`]],
  });
}

describe('/admin/companies', () => {
  it("lists each company's requests by cache result, hit ratio, upstream slots and cache bytes, most first", async () => {
    const res = await companies();
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const listing = res.json() as Listing;
    expect(listing.tracked).toBe(2);
    const [one, two] = listing.companies;
    expect(one).toMatchObject({
      company: '1',
      requests: 6,
      cache: { hit: 3, miss: 3, stale: 0, collapsed: 0, bypass: 0, none: 0 },
      hitRatio: 0.5,
      upstreamSlots: { granted: 3, refused: 0 },
    });
    expect(one?.cacheBytes).toBeGreaterThan(3 * 256);
    expect(two).toMatchObject({ company: '2', requests: 1, cache: { miss: 1 }, upstreamSlots: { granted: 1 } });
    expect(two?.cacheBytes).toBeGreaterThan(256);
    expect(listing.other).toMatchObject({ requests: 0, hitRatio: null, cacheBytes: 0 });
  });

  it('sums the companies beyond `top` as other', async () => {
    const listing = (await companies('?top=1')).json() as Listing;
    expect(listing.companies.map((figures) => figures.company)).toEqual(['1']);
    expect(listing.other).toMatchObject({ requests: 1, cache: { miss: 1 }, upstreamSlots: { granted: 1 } });
    expect(listing.other.cacheBytes).toBeGreaterThan(256);
  });

  it.each(['0', 'x', '1001', '01', '1&top=2'])('refuses top=%s: 400 invalid_parameter naming it', async (top) => {
    const res = await companies(`?top=${top}`);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'invalid_parameter', parameter: 'top' });
  });

  it('is behind the operator token', async () => {
    const res = await send(proxy.adminUrl ?? '', '/admin/companies');
    expect(res.status).toBe(401);
  });
});

describe('the per-company metrics', () => {
  it('count the same requests and slots per company, and the bytes each holds', async () => {
    const metrics = parseExposition((await send(proxy.adminUrl ?? '', '/metrics')).text);
    expect(metrics.value('slab_proxy_company_requests_total', { company: '1', cache: 'hit' })).toBe(3);
    expect(metrics.value('slab_proxy_company_requests_total', { company: '2', cache: 'miss' })).toBe(1);
    expect(metrics.value('slab_proxy_company_upstream_slots_total', { company: '1', result: 'granted' })).toBe(3);
    expect(metrics.value('slab_proxy_company_cache_bytes', { company: '1' })).toBeGreaterThan(3 * 256);
  });
});
