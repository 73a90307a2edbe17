/**
 * Inbound limits through the real proxy: per credential and per company, the RateLimit fields on
 * every answer after authentication, 429s with Retry-After at the window's edges (the proxy's
 * injectable clock), precedence (429 before 404/405/403/400), and hits counted like misses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

const LIMITS = { rateLimit: { perCredential: { points: 3, duration: 10 }, perCompany: { points: 5, duration: 20 } } };
const P = API_PREFIX;

interface Problem {
  readonly code: string;
  readonly retry_after?: number;
  readonly policy?: string;
}

describe('inbound limits (one replica)', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let clock = Date.now();

  beforeAll(async () => {
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, config: LIMITS, now: () => clock });
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  function expectRefusal(res: RawResponse, policy: string, retryAfter: number): void {
    expect(res.status).toBe(429);
    const problem = res.json() as Problem;
    expect(problem.code).toBe('rate_limited');
    expect(problem.policy).toBe(policy);
    expect(problem.retry_after).toBe(retryAfter);
    expect(res.headers['retry-after']).toBe(String(retryAfter));
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers.ratelimit).toBe(`"${policy}";r=0;t=${retryAfter}`);
  }

  it('counts a credential’s requests, hits and misses alike, then refuses until its window resets', async () => {
    const alice = await token({ subject: 'alice' });
    const target = `${P}/warehouses`;
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await getWithToken(proxy.url, target, alice));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.headers['cache-status']?.startsWith('slab-proxy; hit'))).toEqual([false, true, true]);
    expect(answers.map((a) => a.headers.ratelimit)).toEqual([
      '"credential";r=2;t=10',
      '"credential";r=1;t=10',
      '"credential";r=0;t=10',
    ]);
    for (const a of answers) expect(a.headers['ratelimit-policy']).toBe('"credential";q=3;w=10, "company";q=5;w=20');
    clock += 9_000;
    expectRefusal(await getWithToken(proxy.url, target, alice), 'credential', 1);
    clock += 999; // 1 ms before the reset: still refused, and still told 1 s, never 0
    expectRefusal(await getWithToken(proxy.url, target, alice), 'credential', 1);
    clock += 1;
    expect((await getWithToken(proxy.url, target, alice)).status).toBe(200);
  });

  it('holds the company policy across its credentials, and never touches another company', async () => {
    clock += 60_000; // fresh windows
    const target = `${P}/remnants`;
    for (const sub of ['c1', 'c1', 'c2', 'c2', 'c3'])
      expect((await getWithToken(proxy.url, target, await token({ subject: sub }))).status).toBe(200);
    const sixth = await getWithToken(proxy.url, target, await token({ subject: 'c4' }));
    expectRefusal(sixth, 'company', 20);
    // Company 2 and its credentials have their own allowance.
    const other = await getWithToken(proxy.url, target, await token({ company: 2, subject: 'c1' }));
    expect(other.status).toBe(200);
    expect(other.headers.ratelimit).toBe('"credential";r=2;t=10');
  });

  it('a credential’s flood does not spend its company’s allowance', async () => {
    clock += 60_000;
    const target = `${P}/stocktakes`;
    const mallory = await token({ subject: 'mallory' });
    const statuses = [];
    for (let i = 0; i < 10; i++) statuses.push((await getWithToken(proxy.url, target, mallory)).status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    // The company spent 3 of its 5 on mallory's admitted requests, none on the 7 refused ones.
    const dave = await token({ subject: 'dave' });
    expect((await getWithToken(proxy.url, target, dave)).status).toBe(200);
    expect((await getWithToken(proxy.url, target, dave)).status).toBe(200);
    expectRefusal(await getWithToken(proxy.url, target, dave), 'company', 20);
  });

  it('refuses over the limit before 404, 405, 403 and 400, and after 401', async () => {
    clock += 60_000;
    const bob = await token({ subject: 'bob' });
    for (let i = 0; i < 3; i++) await getWithToken(proxy.url, `${P}/receipts`, bob);
    const before = sandbox.stats().served;
    expect((await getWithToken(proxy.url, `${P}/widgets`, bob)).status).toBe(429);
    expect(
      (await send(proxy.url, `${P}/receipts`, { method: 'POST', headers: [['Authorization', `Bearer ${bob}`]] }))
        .status,
    ).toBe(429);
    expect((await getWithToken(proxy.url, `${P}/receipts?per_page=0`, bob)).status).toBe(429);
    const unprivileged = await token({ subject: 'bob', permissions: ['view_slab'] });
    expect((await getWithToken(proxy.url, `${P}/receipts`, unprivileged)).status).toBe(429);
    expect((await send(proxy.url, `${P}/receipts`)).status).toBe(401);
    expect(sandbox.stats().served).toBe(before);
  });

  it('puts the RateLimit fields on every answer after authentication, errors included', async () => {
    clock += 60_000;
    const carol = await token({ subject: 'carol' });
    const notFound = await getWithToken(proxy.url, `${P}/widgets`, carol);
    expect(notFound.status).toBe(404);
    expect(notFound.headers.ratelimit).toBe('"credential";r=2;t=10');
    const badParameter = await getWithToken(proxy.url, `${P}/receipts?foo=1`, carol);
    expect(badParameter.status).toBe(400);
    expect(badParameter.headers['ratelimit-policy']).toBeDefined();
    const unauthenticated = await send(proxy.url, `${P}/receipts`);
    expect(unauthenticated.headers.ratelimit).toBeUndefined();
  });
});
