/** The inbound limits' pure parts: header formats, the tighter policy, refusals, the local window. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatPolicyHeader, verdictOf } from '../../src/limits/limit-verdict.js';
import { LocalWindowLimiter } from '../../src/limits/local-window.js';

const POLICY = formatPolicyHeader({ points: 600, duration: 60 }, { points: 3000, duration: 60 });

describe('RateLimit fields (draft-ietf-httpapi-ratelimit-headers-11)', () => {
  it('lists both policies', () => {
    expect(POLICY).toBe('"credential";q=600;w=60, "company";q=3000;w=60');
  });

  it('reports the tighter policy: fewer left, then the longer wait', () => {
    const v = verdictOf(
      [
        { name: 'credential', points: 600, consumed: 583, msBeforeNext: 41_200 },
        { name: 'company', points: 3000, consumed: 100, msBeforeNext: 59_000 },
      ],
      POLICY,
    );
    expect(v).toMatchObject({
      allowed: true,
      rateLimitHeader: '"credential";r=17;t=42',
      refusedBy: undefined,
      retryAfterSeconds: 0,
    });
    const tie = verdictOf(
      [
        { name: 'credential', points: 10, consumed: 5, msBeforeNext: 1_000 },
        { name: 'company', points: 10, consumed: 5, msBeforeNext: 9_000 },
      ],
      POLICY,
    );
    expect(tie.rateLimitHeader).toBe('"company";r=5;t=9');
  });

  it('refuses when a policy is over, waiting for the last exceeded window, in whole seconds rounded up', () => {
    const one = verdictOf(
      [
        { name: 'credential', points: 10, consumed: 11, msBeforeNext: 4_001 },
        { name: 'company', points: 100, consumed: 50, msBeforeNext: 30_000 },
      ],
      POLICY,
    );
    expect(one).toMatchObject({
      allowed: false,
      refusedBy: 'credential',
      retryAfterSeconds: 5,
      rateLimitHeader: '"credential";r=0;t=5',
    });
    const both = verdictOf(
      [
        { name: 'credential', points: 10, consumed: 11, msBeforeNext: 4_000 },
        { name: 'company', points: 100, consumed: 101, msBeforeNext: 30_000 },
      ],
      POLICY,
    );
    expect(both).toMatchObject({ allowed: false, refusedBy: 'company', retryAfterSeconds: 30 });
    // A window about to reset still says 1 s, never 0: a client never retries early.
    const edge = verdictOf(
      [
        { name: 'credential', points: 1, consumed: 2, msBeforeNext: 1 },
        { name: 'company', points: 100, consumed: 2, msBeforeNext: 1 },
      ],
      POLICY,
    );
    expect(edge.retryAfterSeconds).toBe(1);
  });
});

describe('LocalWindowLimiter', () => {
  it('opens a window on first use and resets it after its duration', () => {
    let now = 1_000_000;
    const limiter = new LocalWindowLimiter(10, { now: () => now });
    expect(limiter.consume('a')).toEqual({ consumed: 1, msBeforeNext: 10_000 });
    now += 9_999;
    expect(limiter.consume('a')).toEqual({ consumed: 2, msBeforeNext: 1 });
    now += 1;
    expect(limiter.consume('a')).toEqual({ consumed: 1, msBeforeNext: 10_000 });
    expect(limiter.consume('b')).toEqual({ consumed: 1, msBeforeNext: 10_000 });
  });

  it('stays bounded in keys', () => {
    let now = 0;
    const limiter = new LocalWindowLimiter(1, { maxKeys: 3, now: () => now });
    for (const key of ['a', 'b', 'c', 'd', 'e']) limiter.consume(key);
    now += 1_000;
    for (const key of ['f', 'g', 'h']) expect(limiter.consume(key).consumed).toBe(1);
  });

  it('keeps the live windows when full, forgetting the oldest first', () => {
    let now = 0;
    const limiter = new LocalWindowLimiter(1, { maxKeys: 3, now: () => now });
    limiter.consume('a');
    now = 100;
    limiter.consume('b');
    limiter.consume('c');
    limiter.consume('d'); // full of live windows: 'a', the oldest, goes
    expect(limiter.size).toBe(3);
    expect(limiter.consume('b').consumed).toBe(2);
    expect(limiter.consume('a').consumed).toBe(1);
  });

  it('drops ended windows as new ones open, a renewed window ending last', () => {
    let now = 0;
    const limiter = new LocalWindowLimiter(1, { now: () => now });
    for (let i = 0; i < 1_000; i++) limiter.consume(`k${String(i)}`);
    now = 500;
    limiter.consume('k0'); // live: counted, not renewed
    now = 1_000;
    expect(limiter.consume('k1')).toEqual({ consumed: 1, msBeforeNext: 1_000 }); // renewed
    expect(limiter.size).toBe(1); // the 999 that ended went with it
    now = 1_500;
    limiter.consume('fresh');
    expect(limiter.size).toBe(2);
    now = 2_000;
    limiter.consume('other');
    // k1 (renewed at 1000) ended at 2000 and went; 'fresh' lives until 2500.
    expect(limiter.size).toBe(2);
    expect(limiter.consume('fresh').consumed).toBe(2);
  });

  it('opens 200,000 windows over a full map, each forgetting exactly one', () => {
    let now = 0;
    const limiter = new LocalWindowLimiter(60, { maxKeys: 1_000, now: () => now });
    let counted = 0;
    for (let i = 0; i < 200_000; i++) {
      if (i % 1_000 === 0) now += 1;
      counted += limiter.consume(`c${String(i)}`).consumed;
    }
    expect(counted).toBe(200_000);
    expect(limiter.size).toBe(1_000);
  });

  it('counts as a plain map of windows would, whatever the order of keys, renewals, evictions and clock steps', () => {
    // The reference: every window in a Map in the order it opened, the ended ones at its front
    // dropped by a scan. The clock may step back (a wall clock does), so that order can differ
    // from the order of ending.
    const reference = (maxKeys: number, durationMs: number) => {
      const windows = new Map<string, { consumed: number; resetAt: number }>();
      return (key: string, now: number) => {
        let window = windows.get(key);
        if (window === undefined || window.resetAt <= now) {
          windows.delete(key);
          for (const [k, w] of windows) {
            if (w.resetAt > now) break;
            windows.delete(k);
          }
          if (windows.size >= maxKeys) windows.delete(windows.keys().next().value as string);
          window = { consumed: 0, resetAt: now + durationMs };
          windows.set(key, window);
        }
        window.consumed += 1;
        return { consumed: window.consumed, msBeforeNext: window.resetAt - now, size: windows.size };
      };
    };
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.array(
          fc.tuple(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), fc.integer({ min: -300, max: 700 })),
          {
            maxLength: 3_000,
          },
        ),
        (maxKeys, steps) => {
          let now = 0;
          const limiter = new LocalWindowLimiter(1, { maxKeys, now: () => now });
          const model = reference(maxKeys, 1_000);
          for (const [key, advance] of steps) {
            now += advance;
            const expected = model(key, now);
            expect(limiter.consume(key)).toEqual({ consumed: expected.consumed, msBeforeNext: expected.msBeforeNext });
            expect(limiter.size).toBe(expected.size);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
