/**
 * The upstream budget's arithmetic in process (src/upstream-guard/slot-ledger.ts): whatever the sequence of
 * asks, releases and registered slots, never more than `maxConcurrent` held, never more than
 * `maxPerSecond` starts in any window, starts spaced evenly and never due before they were granted.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type BudgetLimits,
  RATE_WINDOW_MS,
  RESERVE_AHEAD_MS,
  SlotLedger,
  spacingMs,
} from '../../src/upstream-guard/slot-ledger.js';

const HOLD_MS = 5_000;

describe('the slot ledger', () => {
  it('grants up to maxConcurrent, then waits for a release', () => {
    const ledger = new SlotLedger(HOLD_MS);
    const limits: BudgetLimits = { maxConcurrent: 2, maxPerSecond: 1_000 };
    const first = ledger.grant(0, ['a', 'b', 'c'], limits);
    expect(first).toEqual({ kind: 'granted', startsInMs: [0, spacingMs(limits)] });
    expect(ledger.grant(10, ['c'], limits)).toEqual({ kind: 'full', retryInMs: undefined });
    ledger.release('a');
    expect(ledger.grant(10, ['c'], limits).kind).toBe('granted');
    expect(ledger.held(10)).toBe(2);
  });

  it('spaces starts by the window over maxPerSecond, granting no further ahead than it may', () => {
    const ledger = new SlotLedger(HOLD_MS);
    const limits: BudgetLimits = { maxConcurrent: 100, maxPerSecond: 100 };
    const spacing = spacingMs(limits); // 11 ms
    const result = ledger.grant(
      1_000,
      Array.from({ length: 10 }, (_, i) => `s${String(i)}`),
      limits,
    );
    expect(result.kind).toBe('granted');
    if (result.kind !== 'granted') return;
    const expected = Array.from({ length: Math.floor(RESERVE_AHEAD_MS / spacing) + 1 }, (_, i) => i * spacing);
    expect(result.startsInMs).toEqual(expected);
    // The next start is due one spacing after the last; asked for at once, it is a retry in that much.
    const next = ledger.grant(1_000, ['t'], limits);
    expect(next.kind).toBe('full');
    if (next.kind === 'full') expect(next.retryInMs).toBe(Math.ceil(expected.length * spacing - RESERVE_AHEAD_MS));
  });

  it('counts the starts of the window, registered ones included, and says when one leaves it', () => {
    const ledger = new SlotLedger(HOLD_MS);
    const limits: BudgetLimits = { maxConcurrent: 100, maxPerSecond: 3 };
    ledger.record('r1', 0, 0);
    ledger.record('r2', 0, 0);
    ledger.record('r3', 0, 0);
    ledger.release('r1');
    expect(ledger.grant(500, ['x'], limits)).toEqual({ kind: 'full', retryInMs: RATE_WINDOW_MS - 500 });
    expect(ledger.grant(RATE_WINDOW_MS, ['x'], limits).kind).toBe('granted');
  });

  it('forgets a slot that was never released once its hold is over', () => {
    const ledger = new SlotLedger(1_000);
    const limits: BudgetLimits = { maxConcurrent: 1, maxPerSecond: 1_000 };
    expect(ledger.grant(0, ['lost'], limits).kind).toBe('granted');
    expect(ledger.grant(999, ['next'], limits).kind).toBe('full');
    expect(ledger.grant(1_000, ['next'], limits).kind).toBe('granted');
  });

  it('holds its bounds under any sequence of asks, releases and registrations', () => {
    type Op =
      | { readonly kind: 'ask'; readonly advance: number; readonly count: number }
      | { readonly kind: 'release'; readonly advance: number; readonly pick: number }
      | { readonly kind: 'record'; readonly advance: number; readonly age: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant('ask' as const), advance: fc.nat(200), count: fc.integer({ min: 1, max: 8 }) }),
      fc.record({ kind: fc.constant('release' as const), advance: fc.nat(200), pick: fc.nat() }),
      fc.record({
        kind: fc.constant('record' as const),
        advance: fc.nat(200),
        age: fc.integer({ min: 0, max: 2_000 }),
      }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(op, { maxLength: 120 }),
        (maxConcurrent, maxPerSecond, ops) => {
          const limits = { maxConcurrent, maxPerSecond };
          const ledger = new SlotLedger(HOLD_MS);
          const granted: Array<{ id: string; at: number; start: number }> = [];
          const held = new Set<string>();
          let now = 0;
          let next = 0;
          let registered = 0;
          for (const step of ops) {
            now += step.advance;
            if (step.kind === 'ask') {
              const ids = Array.from({ length: step.count }, () => `g${String(next++)}`);
              const heldBefore = ledger.held(now);
              const result = ledger.grant(now, ids, limits);
              if (result.kind === 'granted') {
                expect(heldBefore + result.startsInMs.length).toBeLessThanOrEqual(maxConcurrent);
                result.startsInMs.forEach((startsIn, i) => {
                  expect(startsIn).toBeGreaterThanOrEqual(0);
                  expect(startsIn).toBeLessThanOrEqual(RESERVE_AHEAD_MS);
                  granted.push({ id: ids[i] ?? '', at: now, start: now + startsIn });
                  held.add(ids[i] ?? '');
                });
              }
            } else if (step.kind === 'release') {
              const ids = [...held];
              const id = ids[step.pick % Math.max(1, ids.length)];
              if (id !== undefined) {
                ledger.release(id);
                held.delete(id);
              }
            } else {
              registered += 1;
              ledger.record(`r${String(registered)}`, now - step.age, now);
            }
            expect(ledger.held(now)).toBeLessThanOrEqual(maxConcurrent + registered);
          }
          // Granted starts: spaced, and never more than maxPerSecond in a window.
          const starts = granted.map((g) => g.start).sort((a, b) => a - b);
          for (let i = 1; i < starts.length; i++) {
            expect((starts[i] ?? 0) - (starts[i - 1] ?? 0)).toBeGreaterThanOrEqual(spacingMs(limits) - 0.001); // starts are said to the µs;
          }
          for (const from of starts) {
            expect(starts.filter((s) => s >= from && s < from + RATE_WINDOW_MS).length).toBeLessThanOrEqual(
              maxPerSecond,
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
