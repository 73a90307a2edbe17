/**
 * Refresh ahead (src/cache/read/refresh-ahead.ts) and the turn gate (src/platform/turn-gate.ts): pages
 * stored together get refresh points spread evenly over the window, each inside it; and deferred
 * work goes through one piece per turn of the event loop, with I/O handled between two pieces.
 */
import { describe, expect, it } from 'vitest';
import { keyFraction, refreshAheadAt, refreshWindowStart } from '../../src/cache/read/refresh-ahead.js';
import { createTurnGate } from '../../src/platform/turn-gate.js';

describe('refresh-ahead points', () => {
  const storedAt = 1_700_000_000_000;
  const freshUntil = storedAt + 10_000;

  it('spreads pages stored together evenly over the last tenth of their freshness', () => {
    const keys = Array.from({ length: 5_000 }, (_, i) => `slab:{1:movements}:v1:c1:per_page=30&cursor=${i}`);
    const points = keys.map((key) => refreshAheadAt(key, storedAt, freshUntil, 0.1));
    const start = refreshWindowStart(storedAt, freshUntil, 0.1);
    expect(start).toBe(freshUntil - 1_000);
    for (const point of points) {
      expect(point).toBeGreaterThan(start);
      expect(point).toBeLessThanOrEqual(freshUntil);
    }
    // Ten slices of the window each hold about a tenth of the pages.
    const slices = Array.from({ length: 10 }, () => 0);
    for (const point of points) {
      const slice = Math.min(9, Math.floor((point - start) / 100));
      slices[slice] = (slices[slice] ?? 0) + 1;
    }
    for (const count of slices) {
      expect(count).toBeGreaterThan(400);
      expect(count).toBeLessThan(600);
    }
  });

  it('puts one page at the same point on every replica, and never before the window, whatever the key', () => {
    const key = 'slab:{7:receipts}:v1:c7:per_page=30';
    expect(refreshAheadAt(key, storedAt, freshUntil, 0.1)).toBe(refreshAheadAt(key, storedAt, freshUntil, 0.1));
    for (const odd of ['', '\u0000', '\ud800', 'x'.repeat(10_000)]) {
      const fraction = keyFraction(odd);
      expect(fraction).toBeGreaterThanOrEqual(0);
      expect(fraction).toBeLessThan(1);
    }
    expect(refreshAheadAt(key, storedAt, freshUntil, 0)).toBe(freshUntil);
  });
});

describe('the turn gate', () => {
  it('lets one caller through per turn of the event loop, in order', async () => {
    const gate = createTurnGate();
    // Counts the loop's turns: an immediate queued by an immediate runs in the next turn.
    let turn = 0;
    let counting = true;
    const count = (): void => {
      turn += 1;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const order: number[] = [];
    const turns = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        gate().then(() => {
          order.push(i);
          return turn;
        }),
      ),
    );
    counting = false;
    expect(order).toEqual([0, 1, 2, 3, 4]);
    // Five turns for five callers: never two in one.
    expect(new Set(turns).size).toBe(5);
    expect([...turns].sort((a, b) => a - b)).toEqual(turns);
  });
});
