/**
 * The upstream guard's rules for a prefetch (src/upstream/guarded-fetch.ts): asked only
 * with a slot to spare, never while the breaker is not closed or the company is paused, and its
 * refusals marked as such and not counted as refused requests.
 */
import { describe, expect, it } from 'vitest';
import { PrefetchStanding } from '../../src/cache/prefetch/prefetch-standing.js';
import type { Origin, OriginOutcome, ReadRequest } from '../../src/cache/read/origin.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { guardOrigin } from '../../src/upstream/guarded-fetch.js';
import { CircuitBreaker } from '../../src/upstream-guard/circuit-breaker.js';
import { createUpstreamBudget } from '../../src/upstream-guard/upstream-budget.js';
import { createUpstreamPause } from '../../src/upstream-guard/upstream-pause.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';

const PRINCIPAL = testPrincipal({ subject: 'walker' });

function request(prefetch: PrefetchStanding | undefined): ReadRequest {
  const read = canonicaliseTarget('/api/slab/v1/operations/receipts?per_page=3');
  if (read instanceof ProxyError) throw new Error(read.code);
  return { read, principal: PRINCIPAL, token: 't', requestId: 'r', prefetch };
}

const OK: OriginOutcome = answered(Buffer.from('{}'));

function guarded(maxConcurrent = 4) {
  let asked = 0;
  const refusals: string[] = [];
  const slots: [string, boolean][] = [];
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
    metrics: {
      upstream: () => undefined,
      upstreamRefused: (reason) => refusals.push(reason),
      companySlot: (company, granted) => slots.push([company, granted]),
    },
  });
  return { origin, breaker, pause, budget, refusals, slots, asked: () => asked };
}

describe('the upstream guard for a prefetch', () => {
  it('asks the upstream when a slot is to spare', async () => {
    const g = guarded();
    expect((await g.origin(request(new PrefetchStanding()))).kind).toBe('answer');
    expect(g.asked()).toBe(1);
    // A prefetch's slots are not its company's clients' (docs/operations.md#per-company-figures).
    expect(g.slots).toEqual([]);
    g.budget.close();
  });

  it('never asks while the breaker is open, nor takes its probe; the refusal is marked and not counted', async () => {
    const g = guarded();
    g.breaker.failure();
    const outcome = await g.origin(request(new PrefetchStanding()));
    expect(outcome).toMatchObject({ kind: 'failure', spareRefused: true });
    expect(g.asked()).toBe(0);
    expect(g.refusals).toEqual([]);
    g.budget.close();
  });

  it('never asks for a company the upstream paused', async () => {
    const g = guarded();
    await g.pause.pause('1', 30_000);
    expect(await g.origin(request(new PrefetchStanding()))).toMatchObject({ kind: 'failure', spareRefused: true });
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
    expect(await g.origin(request(new PrefetchStanding()))).toMatchObject({ kind: 'failure', spareRefused: true });
    expect(g.refusals).toEqual([]);
    expect(g.slots).toEqual([]);
    release();
    await busy;
    g.budget.close();
  });

  it("joined by a client while it waits, waits as that request: takes the freed slot, and a refusal is the request's", async () => {
    const g = guarded(1);
    let release = (): void => undefined;
    const held = new Promise<OriginOutcome>((resolve) => {
      release = () => resolve(OK);
    });
    const busy = g.budget.run(() => held, 1_000);
    const prefetch = new PrefetchStanding();
    const joined = g.origin(request(prefetch));
    await new Promise((resolve) => setTimeout(resolve, 20));
    prefetch.join();
    // Past the prefetch's own 100 ms wait: promoted, it waits as a request (1 s) for the slot.
    await new Promise((resolve) => setTimeout(resolve, 150));
    release();
    expect((await joined).kind).toBe('answer');
    expect(g.asked()).toBe(1);
    expect(g.slots).toEqual([[PRINCIPAL.company, true]]);
    await busy;
    // Joined before the guard: a request from the start, refused as one, and counted.
    const noRoom = guarded(1);
    const hold = noRoom.budget.run(() => new Promise<OriginOutcome>(() => undefined), 1_000);
    const joinedEarly = new PrefetchStanding();
    joinedEarly.join();
    const refused = await guardOrigin(async () => OK, {
      breaker: noRoom.breaker,
      pause: noRoom.pause,
      budget: noRoom.budget,
      maxQueueWaitMs: 30,
      metrics: {
        upstream: () => undefined,
        upstreamRefused: (reason) => noRoom.refusals.push(reason),
        companySlot: (company, granted) => noRoom.slots.push([company, granted]),
      },
    })(request(joinedEarly));
    expect(refused).toMatchObject({ kind: 'failure', fwdStatus: 503 });
    expect(refused).not.toHaveProperty('spareRefused');
    expect(noRoom.refusals).toEqual(['budget']);
    expect(noRoom.slots).toEqual([[PRINCIPAL.company, false]]);
    noRoom.budget.close();
    void hold;
    g.budget.close();
  });
});
