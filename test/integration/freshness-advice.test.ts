/**
 * Freshness advice through the real admin app (docs/cache.md#freshness-advice): the real proxy in
 * front of a stub system of record whose pages change when the test says so, answering a request
 * that carries the page's ETag with a 304, and one page without validators with its body again;
 * the proxy's clock is injected, so pages go stale without waiting. Every figure of
 * `/admin/cache/freshness` and of the gauges comes from the refreshes the proxy really made.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectedStaleness, staleReadShare } from '../../src/cache/freshness/freshness-advice.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { type ProxyHandle, startProxy } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';
import { startStubUpstream } from '../helpers/stub-upstream.js';
import { token } from '../helpers/tokens.js';

const ADMIN_TOKEN = 'freshness-advice-admin-token-of-some-length';
/** 10 s fresh, then no stale window: a read past the TTL waits for the refresh it starts. */
const POLICY = {
  cache: {
    defaults: { ttl: 10, staleWhileRevalidate: 0, staleIfError: 600, notFoundTtl: 5 },
    resources: { warehouses: { ttl: 10 }, movements: { ttl: 10 } },
    refresh: { ahead: 0 },
  },
};
/** The page the stub sends without validators: a refresh of it gets the same body, `identical`. */
const NO_VALIDATORS = 'receipts:3';
/** The upstream's Last-Modified of a page's version n: 120 s after the version before. */
const LAST_MODIFIED_STEP_S = 120;

interface Stub {
  readonly url: string;
  /** The next answer for the page is a new version of it. */
  change(page: string): void;
  /** Body bytes sent in 200s, by resource. */
  readonly bodyBytes: Map<string, number>;
  close(): Promise<void>;
}

/** A page's name, as the tests say it: the resource and its `per_page`. */
function pageOf(url: string): { readonly resource: string; readonly page: string } {
  const parsed = new URL(url, 'http://stub');
  const resource = parsed.pathname.split('/').at(-1) ?? '';
  return { resource, page: `${resource}:${parsed.searchParams.get('per_page') ?? ''}` };
}

async function startStub(): Promise<Stub> {
  const versions = new Map<string, number>();
  const bodyBytes = new Map<string, number>();
  const upstream = await startStubUpstream((req) => {
    const { resource, page } = pageOf(req.url);
    const version = versions.get(page) ?? 0;
    const body = JSON.stringify({
      data: [{ id: 1, page, version }],
      meta: { per_page: 1, has_more: false, next_after_id: null },
    });
    const validators =
      page === NO_VALIDATORS
        ? {}
        : {
            etag: `"${page}-v${String(version)}"`,
            'last-modified': new Date(1_700_000_000_000 + version * LAST_MODIFIED_STEP_S * 1000).toUTCString(),
          };
    if (validators.etag !== undefined && req.headers['if-none-match'] === validators.etag)
      return { status: 304, headers: validators };
    bodyBytes.set(resource, (bodyBytes.get(resource) ?? 0) + Buffer.byteLength(body));
    return { status: 200, headers: { 'content-type': 'application/json', ...validators }, body };
  });
  return {
    url: upstream.url,
    change: (page) => versions.set(page, (versions.get(page) ?? 0) + 1),
    bodyBytes,
    close: () => upstream.close(),
  };
}

interface Advice {
  readonly resource: string;
  readonly ttl_seconds: number;
  readonly refreshes_per_minute: number;
  readonly fills_per_minute: number;
  readonly unchanged_share: number | null;
  readonly upstream_bytes_per_minute: number;
  readonly change_interval_seconds: number | null;
  readonly refresh_wait_seconds: number | null;
  readonly stale_share_estimate: number | null;
  readonly suggested_ttl_seconds: number | null;
  readonly last_modified_interval_seconds: number | null;
  readonly note: string | null;
}
interface Answer {
  readonly resources: Advice[];
  readonly window_seconds: number;
  readonly target_seconds: number;
}

let stub: Stub;
let proxy: ProxyHandle;
let clock: number;
/** The change rate the proxy's refreshes of receipts imply: 6 refreshes held 15 s, one changed. */
const RECEIPTS_RATE = Math.log(6.5 / 5.5) / 15;
/** How long each refreshed copy of receipts outlived its TTL: read 15 s after it was stored. */
const RECEIPTS_WAIT = 5;

function read(page: string, bearer: string): Promise<RawResponse> {
  const [resource, perPage] = page.split(':');
  return getWithToken(proxy.url, `${API_PREFIX}/${resource ?? ''}?per_page=${perPage ?? ''}`, bearer);
}

function admin(path: string): Promise<RawResponse> {
  return send(proxy.adminUrl ?? '', path, { headers: [['authorization', `Bearer ${ADMIN_TOKEN}`]] });
}

beforeAll(async () => {
  stub = await startStub();
  clock = Date.now();
  proxy = await startProxy({ upstreamUrl: stub.url, config: POLICY, now: () => clock, adminToken: ADMIN_TOKEN });
  const bearer = await token({ company: 1 });
  const refreshed = ['receipts:1', 'receipts:2', 'receipts:3', 'warehouses:1'];
  const start = clock;
  // First fills of every page; then two rounds of refreshes, 15 s apart, receipts:2 changed before the first.
  for (const page of [...refreshed, 'movements:1']) expect((await read(page, bearer)).status, page).toBe(200);
  stub.change('receipts:2');
  for (const offset of [15_000, 30_000]) {
    clock = start + offset;
    for (const page of refreshed) {
      const res = await read(page, bearer);
      expect(res.status, page).toBe(200);
      expect(res.headers['cache-status'], page).toContain('fwd=stale');
    }
  }
});

afterAll(async () => {
  await proxy.close();
  await stub.close();
});

describe('GET /admin/cache/freshness', () => {
  it("lists the resources filled here, with this replica's window and the default target", async () => {
    const res = await admin('/admin/cache/freshness');
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const answer = res.json() as Answer;
    expect(answer.window_seconds).toBe(60);
    expect(answer.target_seconds).toBe(5);
    expect(answer.resources.map((r) => r.resource).sort()).toEqual(['movements', 'receipts', 'warehouses']);
  });

  it('reads the figures of receipts off its refreshes: 304s, a changed page, an identical body', async () => {
    const answer = (await admin('/admin/cache/freshness')).json() as Answer;
    const receipts = answer.resources.find((r) => r.resource === 'receipts');
    expect(receipts).toMatchObject({
      ttl_seconds: 10,
      fills_per_minute: 3,
      refreshes_per_minute: 6,
      unchanged_share: 5 / 6,
      upstream_bytes_per_minute: stub.bodyBytes.get('receipts'),
      // receipts:2 went from version 0 to version 1.
      last_modified_interval_seconds: LAST_MODIFIED_STEP_S,
      note: null,
    });
    expect(receipts?.change_interval_seconds).toBeCloseTo(1 / RECEIPTS_RATE, 6);
    expect(receipts?.refresh_wait_seconds).toBe(RECEIPTS_WAIT);
    // Each copy served 10 s, then no stale window: the read 5 s later waited for its refresh.
    const cycle = { ttl: 10, staleWindow: 0, ahead: 0, wait: RECEIPTS_WAIT };
    expect(receipts?.stale_share_estimate).toBeCloseTo(staleReadShare(RECEIPTS_RATE, cycle), 9);
    const suggested = receipts?.suggested_ttl_seconds ?? 0;
    expect(expectedStaleness(RECEIPTS_RATE, suggested)).toBeLessThanOrEqual(5);
    expect(expectedStaleness(RECEIPTS_RATE, suggested + 1)).toBeGreaterThan(5);
  });

  it('says the TTL can grow where no refresh found a change, and that nothing is known without a refresh', async () => {
    const answer = (await admin('/admin/cache/freshness')).json() as Answer;
    expect(answer.resources.find((r) => r.resource === 'warehouses')).toMatchObject({
      refreshes_per_minute: 2,
      unchanged_share: 1,
      upstream_bytes_per_minute: stub.bodyBytes.get('warehouses'),
      change_interval_seconds: null,
      stale_share_estimate: 0,
      suggested_ttl_seconds: null,
      note: 'no change seen: the TTL can grow',
    });
    expect(answer.resources.find((r) => r.resource === 'movements')).toMatchObject({
      fills_per_minute: 1,
      refreshes_per_minute: 0,
      unchanged_share: null,
      change_interval_seconds: null,
      stale_share_estimate: null,
      suggested_ttl_seconds: null,
      last_modified_interval_seconds: null,
    });
  });

  it('judges against the target asked for: a looser one suggests a longer TTL', async () => {
    const answer = (await admin('/admin/cache/freshness?target=20')).json() as Answer;
    expect(answer.target_seconds).toBe(20);
    const receipts = answer.resources.find((r) => r.resource === 'receipts');
    const suggested = receipts?.suggested_ttl_seconds ?? 0;
    expect(expectedStaleness(RECEIPTS_RATE, suggested)).toBeLessThanOrEqual(20);
    expect(expectedStaleness(RECEIPTS_RATE, suggested + 1)).toBeGreaterThan(20);
    expect((await admin('/admin/cache/freshness?target=86400')).status).toBe(200);
    expect((await admin('/admin/cache/freshness?target=0.5')).status).toBe(200);
  });

  it('weighs the TTL in force: a run-time override changes the stale share, not the change interval', async () => {
    const before = ((await admin('/admin/cache/freshness')).json() as Answer).resources.find(
      (r) => r.resource === 'receipts',
    );
    const put = await send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', {
      method: 'PUT',
      headers: [
        ['authorization', `Bearer ${ADMIN_TOKEN}`],
        ['content-type', 'application/json'],
      ],
      body: '{"ttl":60}',
    });
    expect(put.status).toBe(200);
    try {
      const after = ((await admin('/admin/cache/freshness')).json() as Answer).resources.find(
        (r) => r.resource === 'receipts',
      );
      expect(after?.ttl_seconds).toBe(60);
      expect(after?.change_interval_seconds).toBe(before?.change_interval_seconds);
      expect(after?.stale_share_estimate).toBeGreaterThan(before?.stale_share_estimate ?? 1);
    } finally {
      const deleted = await send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', {
        method: 'DELETE',
        headers: [['authorization', `Bearer ${ADMIN_TOKEN}`]],
      });
      expect(deleted.status).toBe(204);
    }
  });

  it('counts the stale window in force: reads served stale while a refresh runs', async () => {
    const receiptsOf = async (): Promise<Advice | undefined> =>
      ((await admin('/admin/cache/freshness')).json() as Answer).resources.find((r) => r.resource === 'receipts');
    const before = await receiptsOf();
    const headers: Array<[string, string]> = [['authorization', `Bearer ${ADMIN_TOKEN}`]];
    const put = await send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', {
      method: 'PUT',
      headers: [...headers, ['content-type', 'application/json']],
      body: '{"staleWhileRevalidate":30}',
    });
    expect(put.status).toBe(200);
    try {
      const after = await receiptsOf();
      expect(after?.change_interval_seconds).toBe(before?.change_interval_seconds);
      const cycle = { ttl: 10, staleWindow: 30, ahead: 0, wait: RECEIPTS_WAIT };
      expect(after?.stale_share_estimate).toBeCloseTo(staleReadShare(RECEIPTS_RATE, cycle), 9);
      expect(after?.stale_share_estimate).toBeGreaterThan(before?.stale_share_estimate ?? 1);
    } finally {
      const deleted = await send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', { method: 'DELETE', headers });
      expect(deleted.status).toBe(204);
    }
  });

  it.each(['0', '-1', 'x', '86401', '1e3', '', '0.0', '5&target=6'])(
    'refuses target=%s: 400 invalid_parameter naming it',
    async (target) => {
      const res = await admin(`/admin/cache/freshness?target=${target}`);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toContain('application/problem+json');
      expect(res.json()).toMatchObject({ code: 'invalid_parameter', parameter: 'target' });
    },
  );

  it('is behind the operator token', async () => {
    expect((await send(proxy.adminUrl ?? '', '/admin/cache/freshness')).status).toBe(401);
  });
});

describe('the freshness metrics', () => {
  it('show the same figures per resource, and the bytes the upstream sent', async () => {
    const metrics = parseExposition((await send(proxy.adminUrl ?? '', '/metrics')).text);
    expect(metrics.value('slab_proxy_cache_change_interval_seconds', { resource: 'receipts' })).toBeCloseTo(
      1 / RECEIPTS_RATE,
      6,
    );
    expect(metrics.value('slab_proxy_cache_unchanged_refresh_ratio', { resource: 'receipts' })).toBeCloseTo(5 / 6, 9);
    expect(metrics.value('slab_proxy_cache_unchanged_refresh_ratio', { resource: 'warehouses' })).toBe(1);
    expect(metrics.value('slab_proxy_cache_stale_read_ratio_estimate', { resource: 'receipts' })).toBeGreaterThan(0);
    expect(metrics.value('slab_proxy_upstream_fill_bytes_total', { resource: 'receipts' })).toBe(
      stub.bodyBytes.get('receipts'),
    );
    // Nothing known of a resource without a change, or without a refresh: no series.
    const intervals = metrics.series('slab_proxy_cache_change_interval_seconds').map((s) => s.labels.resource);
    expect(intervals).toEqual(['receipts']);
    const ratios = metrics.series('slab_proxy_cache_unchanged_refresh_ratio').map((s) => s.labels.resource);
    expect(ratios.sort()).toEqual(['receipts', 'warehouses']);
  });
});
