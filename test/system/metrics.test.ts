/**
 * `/metrics` on the admin port (docs/operations.md#metrics): Prometheus text that parses, with no admin token
 * needed, whose counters move as requests are made — hits, misses, coalesced waits, 401s, 429s,
 * upstream calls and failures, Redis errors and state. Real proxy, real sandbox over HTTP, real
 * `redis-server`, real JWTs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Exposition, parseExposition } from '../helpers/prometheus.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

let sandbox: Sandbox;
let redis: RedisServer;
let proxy: ProxyHandle;
let reader: string;

const ADMIN_TOKEN = 'metrics-admin-token-of-some-length';

beforeAll(async () => {
  sandbox = await startSandbox();
  redis = await startRedis();
  await settledOperatorState(redis);
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    redisUrl: redis.url,
    adminToken: ADMIN_TOKEN,
    config: {
      cache: { resources: { receipts: { ttl: 120 }, remnants: { ttl: 120 } } },
      // Small enough to meet with one credential: the 429s are counted by policy.
      rateLimit: { perCredential: { points: 40, duration: 60 }, perCompany: { points: 1000, duration: 60 } },
    },
  });
  reader = await token({ company: 1, subject: 'metrics-reader' });
});

afterAll(async () => {
  await proxy.close();
  await sandbox.close();
  await redis.stop();
});

async function scrape(): Promise<Exposition> {
  const res = await send(proxy.adminUrl ?? '', '/metrics');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(res.text);
}

const requests = (m: Exposition, labels: Record<string, string>): number =>
  m.value('slab_proxy_requests_total', labels);

describe('/metrics', () => {
  it('is Prometheus text, served without the admin token, with the process metrics', async () => {
    const res = await send(proxy.adminUrl ?? '', '/metrics');
    expect(res.status).toBe(200);
    const metrics = parseExposition(res.text);
    expect(metrics.types.get('slab_proxy_requests_total')).toBe('counter');
    expect(metrics.types.get('slab_proxy_request_duration_seconds')).toBe('histogram');
    expect(metrics.types.get('slab_proxy_upstream_duration_seconds')).toBe('histogram');
    expect(metrics.types.get('process_resident_memory_bytes')).toBe('gauge');
    expect(metrics.value('slab_proxy_upstream_circuit_state')).toBe(0);
    expect(metrics.value('slab_proxy_redis_up')).toBe(1);
  });

  it('counts a miss, a hit and the upstream request behind them, with their latencies', async () => {
    const target = `${API_PREFIX}/receipts?per_page=7`;
    const before = await scrape();
    expect((await getWithToken(proxy.url, target, reader)).status).toBe(200);
    expect((await getWithToken(proxy.url, target, reader)).status).toBe(200);
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>): number =>
      after.value(name, labels) - before.value(name, labels);
    expect(moved('slab_proxy_requests_total', { resource: 'receipts', status: '200', cache: 'miss' })).toBe(1);
    expect(moved('slab_proxy_requests_total', { resource: 'receipts', status: '200', cache: 'hit' })).toBe(1);
    expect(moved('slab_proxy_upstream_requests_total', { resource: 'receipts', status: '200' })).toBe(1);
    expect(moved('slab_proxy_upstream_duration_seconds_count', { resource: 'receipts' })).toBe(1);
    expect(moved('slab_proxy_request_duration_seconds_count', { cache: 'hit' })).toBe(1);
    expect(moved('slab_proxy_l1_lookups_total', { result: 'hit' })).toBe(1);
    expect(moved('slab_proxy_store_lookups_total', { result: 'miss' })).toBe(1);
    // Buckets are cumulative and end at the count.
    const buckets = after.series('slab_proxy_request_duration_seconds_bucket').filter((s) => s.labels.cache === 'hit');
    for (let i = 1; i < buckets.length; i++)
      expect(buckets[i]?.value ?? 0).toBeGreaterThanOrEqual(buckets[i - 1]?.value ?? 0);
    expect(buckets.at(-1)?.labels.le).toBe('+Inf');
    expect(buckets.at(-1)?.value).toBe(after.value('slab_proxy_request_duration_seconds_count', { cache: 'hit' }));
  });

  it('counts coalesced waits: concurrent misses of one page make one upstream request', async () => {
    const target = `${API_PREFIX}/remnants?per_page=9`;
    sandbox.faults.set({ latencyMs: 150, resource: 'remnants', times: 1 });
    const before = await scrape();
    const answers = await Promise.all(Array.from({ length: 6 }, () => getWithToken(proxy.url, target, reader)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const after = await scrape();
    expect(
      after.value('slab_proxy_upstream_requests_total', { resource: 'remnants', status: '200' }) -
        before.value('slab_proxy_upstream_requests_total', { resource: 'remnants', status: '200' }),
    ).toBe(1);
    expect(
      after.value('slab_proxy_coalesced_waits_total', { scope: 'process' }) -
        before.value('slab_proxy_coalesced_waits_total', { scope: 'process' }),
    ).toBe(5);
    expect(
      requests(after, { resource: 'remnants', status: '200', cache: 'collapsed' }) -
        requests(before, { resource: 'remnants', status: '200', cache: 'collapsed' }),
    ).toBe(5);
  });

  it('counts 401s, 404s and upstream failures by status, and 429s by policy', async () => {
    const before = await scrape();
    expect((await send(proxy.url, `${API_PREFIX}/receipts`)).status).toBe(401);
    expect((await getWithToken(proxy.url, `${API_PREFIX}/no-such-thing`, reader)).status).toBe(404);
    sandbox.faults.set({ status: 500, resource: 'stocktakes', times: 1 });
    expect((await getWithToken(proxy.url, `${API_PREFIX}/stocktakes?per_page=3`, reader)).status).toBe(502);
    const limited = await token({ company: 1, subject: 'metrics-limited' });
    const statuses: number[] = [];
    for (let i = 0; i < 42; i++)
      statuses.push((await getWithToken(proxy.url, `${API_PREFIX}/receipts?per_page=7`, limited)).status);
    expect(statuses.filter((s) => s === 429)).toHaveLength(2);
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>): number =>
      after.value(name, labels) - before.value(name, labels);
    expect(moved('slab_proxy_requests_total', { resource: 'receipts', status: '401', cache: 'none' })).toBe(1);
    // A client-chosen path is never a label value.
    expect(moved('slab_proxy_requests_total', { resource: 'other', status: '404', cache: 'none' })).toBe(1);
    expect([...after.samples.keys()].some((series) => series.includes('no-such-thing'))).toBe(false);
    expect(moved('slab_proxy_upstream_requests_total', { resource: 'stocktakes', status: '500' })).toBe(1);
    expect(moved('slab_proxy_requests_total', { resource: 'stocktakes', status: '502', cache: 'none' })).toBe(1);
    expect(moved('slab_proxy_rate_limited_total', { policy: 'credential' })).toBe(2);
    expect(moved('slab_proxy_requests_total', { resource: 'receipts', status: '429', cache: 'none' })).toBe(2);
  });

  it("counts the upstream's own 429 and the pause it starts: 429s by policy, refusals by reason", async () => {
    // Company 2 only: the pause is per company, and the other tests read as company 1.
    const paused = await token({ company: 2, subject: 'metrics-paused' });
    const before = await scrape();
    sandbox.faults.set({ status: 429, retryAfter: '30', resource: 'stocktakes', times: 1 });
    expect((await getWithToken(proxy.url, `${API_PREFIX}/stocktakes?per_page=8`, paused)).status).toBe(429); // the upstream's, passed on
    const refused = await getWithToken(proxy.url, `${API_PREFIX}/transfers?per_page=8`, paused);
    expect(refused.status).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'rate_limited', policy: 'upstream' });
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>): number =>
      after.value(name, labels) - before.value(name, labels);
    expect(moved('slab_proxy_upstream_requests_total', { resource: 'stocktakes', status: '429' })).toBe(1);
    expect(moved('slab_proxy_rate_limited_total', { policy: 'upstream' })).toBe(2);
    expect(moved('slab_proxy_upstream_refusals_total', { reason: 'paused' })).toBe(1);
    expect(moved('slab_proxy_upstream_requests_total', { resource: 'transfers', status: '200' })).toBe(0);
  });

  it('counts Redis errors and reports Redis down, then up again', async () => {
    const before = await scrape();
    await redis.kill();
    // A cold page: its lookup meets the dead connection, and the upstream budget, cut off from its
    // ledger, keeps to this replica's share (`budgetCutOff: share`, the default:
    // docs/limits.md#the-upstream-budget): the reader gets the upstream's page.
    const cold = await getWithToken(proxy.url, `${API_PREFIX}/fulfilments?per_page=4`, reader);
    expect(cold.status).toBe(200);
    const down = await scrape();
    expect(down.value('slab_proxy_redis_up')).toBe(0);
    expect(down.value('slab_proxy_upstream_budget_mode', { mode: 'local' })).toBe(1);
    expect(down.value('slab_proxy_upstream_budget_mode', { mode: 'shared' })).toBe(0);
    expect(before.value('slab_proxy_redis_down_seconds')).toBe(0);
    await until(async () => (await scrape()).value('slab_proxy_redis_down_seconds') > 0, 'the downtime to count');
    expect(down.value('slab_proxy_store_lookups_total', { result: 'unavailable' })).toBeGreaterThan(
      before.value('slab_proxy_store_lookups_total', { result: 'unavailable' }),
    );
    // The client's reconnection attempts fail, each one counted.
    await until(
      async () =>
        (await scrape()).value('slab_proxy_redis_errors_total', { component: 'cache' }) >
        before.value('slab_proxy_redis_errors_total', { component: 'cache' }),
      'a Redis error to be counted',
    );
    await redis.restart();
    await until(
      async () => ((await send(proxy.adminUrl ?? '', '/readyz')).json() as { redis?: string }).redis === 'ok',
      'Redis to be usable again',
    );
    const up = await scrape();
    expect(up.value('slab_proxy_redis_up')).toBe(1);
    expect(up.value('slab_proxy_redis_down_seconds')).toBe(0);
    // Redis came back empty: a new epoch of the budget's ledger, shared once its window is over.
    await until(
      async () => (await scrape()).value('slab_proxy_upstream_budget_mode', { mode: 'shared' }) === 1,
      'the upstream budget to share its ledger again',
    );
  });

  it('reports the build, the requests in flight and what the L1 holds', async () => {
    const target = `${API_PREFIX}/warehouses?per_page=11`;
    const before = await scrape();
    expect((await getWithToken(proxy.url, target, reader)).status).toBe(200);
    const after = await scrape();
    expect(after.series('slab_proxy_build_info')).toHaveLength(1);
    expect(after.value('slab_proxy_cache_entries', { tier: 'l1' })).toBeGreaterThan(
      before.value('slab_proxy_cache_entries', { tier: 'l1' }),
    );
    expect(after.value('slab_proxy_cache_bytes', { tier: 'l1' })).toBeGreaterThan(
      before.value('slab_proxy_cache_bytes', { tier: 'l1' }),
    );

    // A slow upstream answer: counted in flight while it waits, counted out once answered.
    sandbox.faults.set({ latencyMs: 1_000, resource: 'transfer-items', times: 1 });
    const slow = getWithToken(proxy.url, `${API_PREFIX}/transfer-items?per_page=6`, reader);
    await until(
      async () => (await scrape()).value('slab_proxy_requests_in_flight') === 1,
      'the slow request to be in flight',
    );
    expect((await slow).status).toBe(200);
    expect((await scrape()).value('slab_proxy_requests_in_flight')).toBe(0);
  });
});
