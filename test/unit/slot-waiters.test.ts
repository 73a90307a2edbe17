/** The two lines of requests waiting for an upstream slot: requests first, prefetches after. */
import { describe, expect, it } from 'vitest';
import { type Slot, SlotWaiters } from '../../src/upstream-guard/slot-waiters.js';

const slot = (id: string, startAt: number): Slot => ({ id, startAt, startBy: startAt + 50 });

describe('SlotWaiters', () => {
  it('serves the requests first, in order, and a prefetch only once no request waits', async () => {
    const waiters = new SlotWaiters(() => 1_000);
    const prefetch = waiters.waitSpare(1_000);
    const first = waiters.wait(1_000);
    const second = waiters.wait(1_000);
    expect(waiters.size).toBe(3);
    expect(waiters.requests).toBe(2);
    expect(waiters.hand(slot('a', 1_000))).toBe(true);
    expect(waiters.hand(slot('b', 1_000))).toBe(true);
    expect(waiters.hand(slot('c', 1_000))).toBe(true);
    expect((await first)?.id).toBe('a');
    expect((await second)?.id).toBe('b');
    expect((await prefetch)?.id).toBe('c');
    expect(waiters.hand(slot('d', 1_000))).toBe(false);
  });

  it('gives a prefetch only a slot that can start now: offered a later one, it gives up and the slot is not taken', async () => {
    const waiters = new SlotWaiters(() => 1_000);
    const prefetch = waiters.waitSpare(1_000);
    expect(waiters.hand(slot('later', 1_001))).toBe(false);
    expect(await prefetch).toBeUndefined();
    expect(waiters.size).toBe(0);
  });

  it('counts a slot paced within the leeway (the spacing between starts) as one that starts now for a prefetch', async () => {
    const waiters = new SlotWaiters(
      () => 1_000,
      () => 5,
    );
    const paced = waiters.waitSpare(1_000);
    expect(waiters.hand(slot('paced', 1_005))).toBe(true);
    expect((await paced)?.id).toBe('paced');
    const later = waiters.waitSpare(1_000);
    expect(waiters.hand(slot('later', 1_006))).toBe(false);
    expect(await later).toBeUndefined();
  });

  it("promotes a prefetch a request joined: to the end of the first line, with the request's bound, and any slot", async () => {
    let at = 1_000;
    const waiters = new SlotWaiters(() => at);
    let promote = (): void => undefined;
    const prefetch = waiters.waitSpare(20, { whenPromoted: (p) => (promote = p), waitMs: 10_000 });
    const request = waiters.wait(10_000);
    promote();
    expect(waiters.requests).toBe(2);
    // Past the prefetch's own 20 ms bound: promoted, it waits as long as a request.
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(waiters.hand(slot('a', 1_000))).toBe(true);
    at = 999; // a slot whose start is still to come: a prefetch gives up on it, a promoted one takes it
    expect(waiters.hand(slot('later', 1_000))).toBe(true);
    expect((await request)?.id).toBe('a');
    expect((await prefetch)?.id).toBe('later');
    expect(waiters.size).toBe(0);
  });

  it('leaves a prefetch that already gave up alone when it is promoted', async () => {
    const waiters = new SlotWaiters(() => 1_000);
    let promote = (): void => undefined;
    const prefetch = waiters.waitSpare(1_000, { whenPromoted: (p) => (promote = p), waitMs: 10_000 });
    expect(waiters.hand(slot('later', 1_001))).toBe(false);
    expect(await prefetch).toBeUndefined();
    promote();
    expect(waiters.size).toBe(0);
  });

  it('refuses every waiter of both lines when closed', async () => {
    const waiters = new SlotWaiters();
    const request = waiters.wait(1_000);
    const prefetch = waiters.waitSpare(1_000);
    waiters.refuseAll();
    expect(await request).toBeUndefined();
    expect(await prefetch).toBeUndefined();
    expect(waiters.size).toBe(0);
  });
});
