/**
 * The upstream guard's rules for a prefetch (issue 19; src/upstream/guarded-fetch.ts): asked only
 * with a slot to spare, never while the breaker is not closed or the company is paused, and its
 * refusals marked as such and not counted as refused requests.
 */
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import type { Origin, OriginOutcome, ReadRequest } from '../../src/cache/origin.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { CircuitBreaker } from '../../src/limits/circuit-breaker.js';
import { createUpstreamBudget } from '../../src/limits/upstream-budget.js';
import { createUpstreamPause } from '../../src/limits/upstream-pause.js';
import { guardOrigin } from '../../src/upstream/guarded-fetch.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';

const PRINCIPAL: Principal = {
  company: '1',
  credential: 'sub:walker',
  subject: 'walker',
  tokenId: undefined,
  permissions: new Set(['view_slab', 'view_slab_logistics']),
  employee: undefined,
  scope: undefined,
  modules: undefined,
  expiresAt: Date.now() / 1000 + 3600,
  tokenDigest: 'digest',
};

function request(spare: boolean): ReadRequest {
  const read = canonicaliseTarget('/api/slab/v1/operations/receipts?per_page=3');
  if (read instanceof ProxyError) throw new Error(read.code);
  return { read, principal: PRINCIPAL, token: 't', requestId: 'r', spare };
}

const OK: OriginOutcome = {
  kind: 'answer',
  answer: {
    status: 200,
    contentType: 'application/json',
    retryAfter: undefined,
    etag: undefined,
    lastModified: undefined,
    body: Buffer.from('{}'),
    elapsedMs: 1,
  },
};

function guarded(maxConcurrent = 4) {
  let asked = 0;
  const refusals: string[] = [];
  const breaker = new CircuitBreaker({ failures: 1, openForMs: 60_000 });
  const pause = createUpstreamPause({ probeMs: 1_000 });
  const budget = createUpstreamBudget({ maxConcurrent, maxPerSecond: 1_000, replicas: 1, holdMs: 1_000 });
  const fetch: Origin = async () => {
    asked += 1;
    return OK;
  };
  const origin = guardOrigin(fetch, {
    breaker,
    pause,
    budget,
    maxQueueWaitMs: 1_000,
    metrics: { upstream: () => undefined, upstreamRefused: (reason) => refusals.push(reason) },
  });
  return { origin, breaker, pause, budget, refusals, asked: () => asked };
}

describe('the upstream guard for a prefetch', () => {
  it('asks the upstream when a slot is to spare', async () => {
    const g = guarded();
    expect((await g.origin(request(true))).kind).toBe('answer');
    expect(g.asked()).toBe(1);
    g.budget.close();
  });

  it('never asks while the breaker is open, nor takes its probe; the refusal is marked and not counted', async () => {
    const g = guarded();
    g.breaker.failure();
    const outcome = await g.origin(request(true));
    expect(outcome).toMatchObject({ kind: 'failure', spareRefused: true });
    expect(g.asked()).toBe(0);
    expect(g.refusals).toEqual([]);
    g.budget.close();
  });

  it('never asks for a company the upstream paused', async () => {
    const g = guarded();
    await g.pause.pause('1', 30_000);
    expect(await g.origin(request(true))).toMatchObject({ kind: 'failure', spareRefused: true });
    expect(g.asked()).toBe(0);
    expect(g.refusals).toEqual([]);
    g.budget.close();
  });

  it('is refused when no slot comes to spare, and the refusal is not counted as a refused request', async () => {
    const g = guarded(1);
    let release = (): void => undefined;
    const held = new Promise<OriginOutcome>((resolve) => {
      release = () => resolve(OK);
    });
    const busy = g.budget.run(() => held, 1_000);
    expect(await g.origin(request(true))).toMatchObject({ kind: 'failure', spareRefused: true });
    expect(g.refusals).toEqual([]);
    release();
    await busy;
    g.budget.close();
  });
});
