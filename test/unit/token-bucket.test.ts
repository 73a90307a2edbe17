/**
 * The change feed's token bucket (src/platform/token-bucket.ts) on a clock the test moves: full at
 * the start, a take all or nothing, refilled at its rate up to its burst, and the wait a refused
 * take is told: exactly until the bucket holds the count, which `Retry-After` rounds up to whole
 * seconds, at least 1 (src/http/retry-after.ts).
 */
import { describe, expect, it } from 'vitest';
import { secondsToWait } from '../../src/http/retry-after.js';
import { TokenBucket } from '../../src/platform/token-bucket.js';

function bucket(perSecond: number, burst: number) {
  let clock = 1_000_000;
  const tokens = new TokenBucket({ perSecond, burst }, () => clock);
  return {
    tokens,
    advance(ms: number) {
      clock += ms;
    },
  };
}

describe('the token bucket', () => {
  it('starts full, and a take is all or nothing', () => {
    const { tokens } = bucket(10, 100);
    expect(tokens.take(60)).toEqual({ taken: true });
    // 40 left: a take of 50 takes none of them, and a take of 40 still finds them.
    expect(tokens.take(50)).toEqual({ taken: false, waitMs: 1_000 });
    expect(tokens.take(40)).toEqual({ taken: true });
  });

  it('tells the wait until it holds the count: (count − held) / rate', () => {
    const { tokens, advance } = bucket(2_000, 10_000);
    expect(tokens.take(10_000).taken).toBe(true);
    expect(tokens.take(500)).toEqual({ taken: false, waitMs: 250 });
    advance(100); // 200 held
    expect(tokens.take(500)).toEqual({ taken: false, waitMs: 150 });
    advance(150);
    expect(tokens.take(500)).toEqual({ taken: true });
  });

  it('gives Retry-After in whole seconds, rounded up, at least 1', () => {
    const { tokens } = bucket(3, 30);
    expect(tokens.take(30).taken).toBe(true);
    const cases: Array<[number, number]> = [
      [1, 1], // 333 ms
      [3, 1], // exactly 1 s
      [4, 2], // 1.33 s
      [30, 10],
    ];
    for (const [count, seconds] of cases) {
      const take = tokens.take(count);
      expect(take.taken).toBe(false);
      if (!take.taken) expect(secondsToWait(take.waitMs), String(count)).toBe(seconds);
    }
  });

  it('refills at its rate up to its burst, never beyond', () => {
    const { tokens, advance } = bucket(100, 1_000);
    expect(tokens.take(1_000).taken).toBe(true);
    advance(60_000);
    expect(tokens.take(1_000)).toEqual({ taken: true });
    expect(tokens.take(1)).toEqual({ taken: false, waitMs: 10 });
  });

  it('gains nothing from a clock that steps back, and loses nothing either', () => {
    const { tokens, advance } = bucket(10, 100);
    expect(tokens.take(100).taken).toBe(true);
    advance(-5_000);
    expect(tokens.take(1)).toEqual({ taken: false, waitMs: 100 });
    advance(5_100);
    expect(tokens.take(1)).toEqual({ taken: true });
  });

  it('refuses to take more than its burst: the caller answers such a batch itself', () => {
    const { tokens } = bucket(10, 100);
    expect(tokens.burst).toBe(100);
    expect(() => tokens.take(101)).toThrow(RangeError);
  });
});
