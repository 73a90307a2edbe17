/**
 * The upstream guard through the real proxy: an upstream 429 pauses that company's upstream calls
 * (on every replica) until its Retry-After, stale copies are served meanwhile, one probe ends it;
 * repeated failures open the circuit breaker, which fails fast and closes after one good probe.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
/** No stale-while-revalidate: a stale entry goes upstream, and stale-if-error decides. */
const CONFIG = {
  cache: {
    defaults: { ttl: 10, staleWhileRevalidate: 0, staleIfError: 600, notFoundTtl: 5 },
    resources: { warehouses: { ttl: 10 }, movements: { ttl: 10 } },
  },
  upstream: { breaker: { failures: 3, openFor: 10 } },
};

interface Problem {
  readonly code: string;
  readonly policy?: string;
  readonly retry_after?: number;
}

function problem(res: RawResponse): Problem {
  return res.json() as Problem;
}

describe('after an upstream 429', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let clock: number;
  let bearer: string;

  beforeEach(async () => {
    clock = Date.now();
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, config: CONFIG, now: () => clock });
    bearer = await token();
  });
  afterEach(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('pauses the company’s upstream calls for Retry-After seconds: stale copies meanwhile, 429 without one', async () => {
    const warm = await getWithToken(proxy.url, `${P}/receipts`, bearer);
    clock += 20_000; // the warmed page is stale now
    sandbox.faults.set({ status: 429, retryAfter: '30', times: 1 });
    const first = await getWithToken(proxy.url, `${P}/transfers`, bearer);
    expect(first.status).toBe(429);
    expect(first.json()).toEqual({ error: 'fault_429' }); // the upstream's own answer
    const served = sandbox.stats().served;

    const cold = await getWithToken(proxy.url, `${P}/stocktakes`, bearer);
    expect(cold.status).toBe(429);
    expect(problem(cold)).toMatchObject({ code: 'rate_limited', policy: 'upstream', retry_after: 30 });
    expect(cold.headers['retry-after']).toBe('30');
    const stale = await getWithToken(proxy.url, `${P}/receipts`, bearer);
    expect(stale.status).toBe(200);
    expect(stale.body.equals(warm.body)).toBe(true);
    expect(stale.headers['cache-status']).toBe('slab-proxy; fwd=stale; fwd-status=429; ttl=-10');
    expect(sandbox.stats().served).toBe(served); // nothing reached the upstream for company 1
    // Another company is not paused.
    expect((await getWithToken(proxy.url, `${P}/stocktakes`, await token({ company: 2 }))).status).toBe(200);

    clock += 12_000;
    expect(problem(await getWithToken(proxy.url, `${P}/stocktakes`, bearer)).retry_after).toBe(18);
  });

  it('ends with one probe: the others wait until it has succeeded', async () => {
    sandbox.faults.set({ status: 429, retryAfter: '5', times: 1 });
    await getWithToken(proxy.url, `${P}/transfers`, bearer);
    clock += 5_000;
    sandbox.faults.set({ latencyMs: 200, times: 1 }); // the probe takes a while
    const before = sandbox.stats().served;
    const pages = ['receipts', 'remnants', 'warehouses', 'quote-links', 'fulfilments'];
    const answers = await Promise.all(pages.map((page) => getWithToken(proxy.url, `${P}/${page}`, bearer)));
    expect(sandbox.stats().served).toBe(before + 1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const waiting of answers.filter((a) => a.status !== 200)) {
      expect(waiting.status).toBe(429);
      expect(problem(waiting)).toMatchObject({ code: 'rate_limited', policy: 'upstream', retry_after: 1 });
    }
    // The probe succeeded: the company's calls resume.
    expect((await getWithToken(proxy.url, `${P}/remnants?per_page=3`, bearer)).status).toBe(200);
  });

  it.each([
    ['an HTTP date', (now: number) => new Date(now + 20_000).toUTCString(), 20],
    ['garbage', () => 'tomorrow-ish', 5],
  ])('reads a Retry-After given as %s', async (_label, header, seconds) => {
    sandbox.faults.set({ status: 429, retryAfter: header(clock), times: 1 });
    await getWithToken(proxy.url, `${P}/transfers`, bearer);
    const paused = await getWithToken(proxy.url, `${P}/stocktakes`, bearer);
    expect(problem(paused)).toMatchObject({ code: 'rate_limited', policy: 'upstream' });
    // An HTTP date has whole-second precision: the wait is within a second of the one asked.
    expect(Math.abs(Number(paused.headers['retry-after']) - seconds)).toBeLessThanOrEqual(1);
  });
});

describe('the pause is shared by every replica (Redis)', () => {
  let redis: RedisServer;
  let sandbox: Sandbox;
  let replicas: ProxyHandle[];

  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    sandbox = await startSandbox();
    replicas = [
      await startProxy({ upstreamUrl: sandbox.url, config: CONFIG, redisUrl: redis.url }),
      await startProxy({ upstreamUrl: sandbox.url, config: CONFIG, redisUrl: redis.url }),
    ];
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await sandbox.close();
    await redis.stop();
  });

  it('a 429 seen by one replica pauses the company on the other', async () => {
    const [one, two] = replicas as [ProxyHandle, ProxyHandle];
    const bearer = await token();
    sandbox.faults.set({ status: 429, retryAfter: '60', times: 1 });
    expect((await getWithToken(one.url, `${P}/transfers`, bearer)).status).toBe(429);
    const served = sandbox.stats().served;
    const onTwo = await getWithToken(two.url, `${P}/stocktakes`, bearer);
    expect(onTwo.status).toBe(429);
    expect(problem(onTwo)).toMatchObject({ code: 'rate_limited', policy: 'upstream' });
    expect(Number(onTwo.headers['retry-after'])).toBeGreaterThanOrEqual(59);
    expect(sandbox.stats().served).toBe(served);
  });
});

describe('the circuit breaker', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let clock: number;
  let bearer: string;

  beforeAll(async () => {
    clock = Date.now();
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, config: CONFIG, now: () => clock });
    bearer = await token();
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('opens after 3 failures in a row, fails fast (stale or 503), and closes after one good probe', async () => {
    const warm = await getWithToken(proxy.url, `${P}/receipts`, bearer);
    clock += 20_000;
    sandbox.faults.set({ status: 500, times: 3 });
    for (const page of ['transfers', 'stocktakes', 'remnants'])
      expect((await getWithToken(proxy.url, `${P}/${page}`, bearer)).status).toBe(502);
    const served = sandbox.stats().served;
    const fast = await getWithToken(proxy.url, `${P}/fulfilments`, bearer);
    expect(fast.status).toBe(503);
    expect(problem(fast).code).toBe('upstream_unavailable');
    expect(fast.headers['retry-after']).toBe('10');
    const stale = await getWithToken(proxy.url, `${P}/receipts`, bearer);
    expect(stale.body.equals(warm.body)).toBe(true);
    expect(stale.headers['cache-status']).toBe('slab-proxy; fwd=stale; fwd-status=503; ttl=-10');
    expect(sandbox.stats().served).toBe(served);

    clock += 10_000; // half-open: one probe, which succeeds
    expect((await getWithToken(proxy.url, `${P}/fulfilments`, bearer)).status).toBe(200);
    expect(sandbox.stats().served).toBe(served + 1);
    expect((await getWithToken(proxy.url, `${P}/quote-links`, bearer)).status).toBe(200);
  });

  it('opens again when the probe fails', async () => {
    sandbox.faults.set({ status: 503, times: 4 });
    for (const page of ['transfer-items', 'movements', 'supplier-materials'])
      await getWithToken(proxy.url, `${P}/${page}`, bearer);
    clock += 10_000;
    expect((await getWithToken(proxy.url, `${P}/fulfilment-proofs`, bearer)).status).toBe(502); // the probe, failed
    const served = sandbox.stats().served;
    expect((await getWithToken(proxy.url, `${P}/quote-link-items`, bearer)).status).toBe(503);
    expect(sandbox.stats().served).toBe(served);
  });
});
