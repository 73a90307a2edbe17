/**
 * The sandbox as a system of record in its own right: its 429 above the configured rate (passed
 * through the proxy with Retry-After), its control API over HTTP, and that the control API does not
 * exist unless enabled.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { startProxy, startSandbox, NO_CACHE } from '../helpers/env.js';
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
