/**
 * A cached page's times (src/cache/read/page-lifetime.ts): its lifetime under a fixed TTL, as a
 * record 404 and under automatic lifetimes within their bounds (docs/cache.md#automatic-lifetimes),
 * when it stops being fresh, how long it is kept, its stale-while-revalidate window (shorter for a
 * page with a lifetime of its own, and after an invalidation: docs/cache.md#soft-invalidation), its
 * stale-if-error horizon, its next automatic lifetime under the ceiling, and how long a record's
 * invalidation mark outlives every entry of a policy.
 */
import { describe, expect, it } from 'vitest';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import {
  filledTimes,
  freshUntilUnder,
  keepUntil,
  lifetimeMs,
  longestKeptMs,
  nextLifetimeMs,
  policyLifetimeMs,
  revalidateWindowMs,
  revalidatingUntil,
  servedLifetimeMs,
  staleIfErrorUntil,
} from '../../src/cache/read/page-lifetime.js';
import type { EffectivePolicy } from '../../src/cache/read/policy.js';
import { storedEntry } from '../helpers/entries.js';

const AT = 1_800_000_000_000;

/** ttl 30 s, 404s 5 s, stale-while-revalidate 20 s, stale-if-error 300 s; fixed lifetimes. */
const FIXED: EffectivePolicy = {
  ttl: 30,
  notFoundTtl: 5,
  staleWhileRevalidate: 20,
  staleIfError: 300,
  partition: 'company',
  prefetch: false,
  autoTtl: undefined,
};
/** The same with automatic lifetimes of 2 s to 600 s. */
const AUTO: EffectivePolicy = { ...FIXED, autoTtl: { min: 2, max: 600 } };

function page(fields: Partial<CacheEntry> = {}): CacheEntry {
  return storedEntry(AT, fields);
}

describe('how long a page is fresh', () => {
  it('a 200 its ttl, a record 404 its notFoundTtl, under a fixed TTL (RFC 9111 §4.2.1)', () => {
    expect(policyLifetimeMs(200, FIXED)).toBe(30_000);
    expect(policyLifetimeMs(404, FIXED)).toBe(5_000);
    expect(lifetimeMs(page(), FIXED)).toBe(30_000);
    expect(lifetimeMs(page({ status: 404 }), FIXED)).toBe(5_000);
    // A lifetime of its own counts only under automatic lifetimes.
    expect(lifetimeMs(page({ autoLifetimeMs: 7_000 }), FIXED)).toBe(30_000);
  });

  it('under automatic lifetimes: its own, within the bounds in force; the ttl without one; a 404 its notFoundTtl', () => {
    expect(lifetimeMs(page({ autoLifetimeMs: 7_000 }), AUTO)).toBe(7_000);
    expect(lifetimeMs(page({ autoLifetimeMs: 500 }), AUTO)).toBe(2_000);
    expect(lifetimeMs(page({ autoLifetimeMs: 900_000 }), AUTO)).toBe(600_000);
    expect(lifetimeMs(page(), AUTO)).toBe(30_000);
    expect(lifetimeMs(page({ status: 404, autoLifetimeMs: 7_000 }), AUTO)).toBe(5_000);
  });

  it('is fresh until its storing plus the lifetime under the policy in force, not the one it was stored under', () => {
    const stored = page({ freshUntil: AT + 60_000 });
    expect(freshUntilUnder(stored, FIXED)).toBe(AT + 30_000);
    expect(freshUntilUnder(stored, { ...FIXED, ttl: 90 })).toBe(AT + 90_000);
    expect(freshUntilUnder(page({ autoLifetimeMs: 7_000 }), { ...AUTO, autoTtl: { min: 10, max: 20 } })).toBe(
      AT + 10_000,
    );
  });

  it('serves with the lifetime it stands at: from its storing to its freshness’s end (max-age)', () => {
    expect(servedLifetimeMs(page({ freshUntil: AT + 12_345 }))).toBe(12_345);
  });
});

describe('the times a fill stores', () => {
  it('a fixed TTL: fresh for ttl (notFoundTtl for a 404), kept the longer stale window past it', () => {
    expect(filledTimes(200, FIXED, AT, undefined, false)).toEqual({
      storedAt: AT,
      freshUntil: AT + 30_000,
      keepUntil: AT + 30_000 + 300_000,
      autoLifetimeMs: undefined,
    });
    expect(filledTimes(404, FIXED, AT, undefined, false)).toMatchObject({
      freshUntil: AT + 5_000,
      keepUntil: AT + 5_000 + 300_000,
    });
  });

  it('an automatic lifetime: fresh for it as given (the ceiling may have held it to the ttl), and kept', () => {
    expect(filledTimes(200, AUTO, AT, 7_000, false)).toEqual({
      storedAt: AT,
      freshUntil: AT + 7_000,
      keepUntil: AT + 7_000 + 300_000,
      autoLifetimeMs: 7_000,
    });
  });

  it('kept past freshness for the longer of stale-while-revalidate and stale-if-error; a minute at least when fetched ahead', () => {
    expect(keepUntil(AT, FIXED, false)).toBe(AT + 300_000);
    expect(keepUntil(AT, { ...FIXED, staleWhileRevalidate: 400 }, false)).toBe(AT + 400_000);
    const noStale = { ...FIXED, staleWhileRevalidate: 0, staleIfError: 0 };
    expect(keepUntil(AT, noStale, false)).toBe(AT);
    expect(keepUntil(AT, noStale, true)).toBe(AT + 60_000);
    expect(keepUntil(AT, FIXED, true)).toBe(AT + 300_000);
    expect(filledTimes(200, noStale, AT, undefined, true).keepUntil).toBe(AT + 30_000 + 60_000);
  });
});

describe('a page’s next automatic lifetime', () => {
  const first = { kind: 'first' } as const;
  const tenSecondsOld = new Date(AT - 100_000).toUTCString(); // a tenth: 10 s, below the ttl

  it('none under a fixed TTL, nor for a 404; the clock is not read then', () => {
    const now = (): number => {
      throw new Error('read the clock');
    };
    expect(nextLifetimeMs(200, FIXED, first, tenSecondsOld, now, () => true)).toBeUndefined();
    expect(nextLifetimeMs(404, AUTO, first, tenSecondsOld, now, () => true)).toBeUndefined();
  });

  it('one shorter than the ttl only with a token of the ceiling, else the ttl; no token asked for a longer one', () => {
    let asked = 0;
    const grant = (answer: boolean) => () => {
      asked += 1;
      return answer;
    };
    expect(nextLifetimeMs(200, AUTO, first, tenSecondsOld, () => AT, grant(true))).toBe(10_000);
    expect(nextLifetimeMs(200, AUTO, first, tenSecondsOld, () => AT, grant(false))).toBe(30_000);
    expect(asked).toBe(2);
    const previous = page({ freshUntil: AT + 40_000, autoLifetimeMs: 40_000 });
    expect(nextLifetimeMs(200, AUTO, { kind: 'unchanged', previous }, undefined, () => AT, grant(false))).toBe(80_000);
    expect(asked).toBe(2);
  });

  it('within the policy’s bounds', () => {
    const previous = page({ freshUntil: AT + 400_000, autoLifetimeMs: 400_000 });
    expect(
      nextLifetimeMs(
        200,
        AUTO,
        { kind: 'unchanged', previous },
        undefined,
        () => AT,
        () => true,
      ),
    ).toBe(600_000);
    const often = page({ freshUntil: AT + 3_000, autoLifetimeMs: 3_000 });
    expect(
      nextLifetimeMs(
        200,
        AUTO,
        { kind: 'changed', previous: often },
        undefined,
        () => AT + 3_000,
        () => true,
      ),
    ).toBe(2_000);
  });
});

describe('how long past its freshness a page is served', () => {
  it('while one refresh runs: the policy’s stale-while-revalidate under a fixed TTL (RFC 5861 §3)', () => {
    expect(revalidateWindowMs(FIXED, 1_000)).toBe(20_000);
    expect(revalidatingUntil(page({ freshUntil: AT + 30_000 }), FIXED, undefined)).toBe(AT + 50_000);
  });

  it('a page with a lifetime of its own: no longer than that lifetime', () => {
    expect(revalidateWindowMs(AUTO, 3_000)).toBe(3_000);
    expect(revalidateWindowMs(AUTO, 90_000)).toBe(20_000);
    expect(revalidatingUntil(page({ freshUntil: AT + 3_000, autoLifetimeMs: 3_000 }), AUTO, undefined)).toBe(
      AT + 6_000,
    );
    // Its lifetime under the bounds in force, the ttl without one of its own.
    expect(revalidatingUntil(page({ freshUntil: AT + 1_000, autoLifetimeMs: 1_000 }), AUTO, undefined)).toBe(
      AT + 3_000,
    );
    expect(revalidatingUntil(page({ freshUntil: AT + 30_000 }), AUTO, undefined)).toBe(AT + 50_000);
  });

  it('after an invalidation: at most cache.invalidation.staleFor past it, the window alone without one', () => {
    const invalidated = page({ freshUntil: AT + 4_000, invalidatedAt: AT + 4_000 });
    expect(revalidatingUntil(invalidated, FIXED, 1_000)).toBe(AT + 5_000);
    expect(revalidatingUntil(invalidated, FIXED, 60_000)).toBe(AT + 24_000);
    expect(revalidatingUntil(invalidated, FIXED, undefined)).toBe(AT + 24_000);
    // Only an invalidated page is held to it.
    expect(revalidatingUntil(page({ freshUntil: AT + 4_000 }), FIXED, 1_000)).toBe(AT + 24_000);
  });

  it('on an upstream failure: the policy’s stale-if-error (RFC 5861 §4), whatever its lifetime', () => {
    expect(staleIfErrorUntil(page({ freshUntil: AT + 30_000 }), FIXED)).toBe(AT + 330_000);
    expect(staleIfErrorUntil(page({ freshUntil: AT + 3_000, autoLifetimeMs: 3_000 }), AUTO)).toBe(AT + 303_000);
  });
});

describe('how long any page of a policy may be kept (a record mark’s lifetime)', () => {
  it('its longest freshness, its longer stale window and the minute of a page fetched ahead', () => {
    expect(longestKeptMs(FIXED)).toBe((30 + 300 + 60) * 1000);
    expect(longestKeptMs({ ...FIXED, notFoundTtl: 120 })).toBe((120 + 300 + 60) * 1000);
    expect(longestKeptMs(AUTO)).toBe((600 + 300 + 60) * 1000);
    expect(longestKeptMs({ ...FIXED, staleWhileRevalidate: 900 })).toBe((30 + 900 + 60) * 1000);
  });

  it('outlasts the keep of every entry a fill of the policy stores', () => {
    for (const policy of [FIXED, AUTO, { ...FIXED, staleWhileRevalidate: 0, staleIfError: 0 }]) {
      const longest = longestKeptMs(policy);
      for (const [status, own] of [
        [200, undefined],
        [404, undefined],
        [200, (policy.autoTtl?.max ?? 0) * 1000],
      ] as const) {
        for (const ahead of [false, true]) {
          const times = filledTimes(status, policy, AT, policy.autoTtl === undefined ? undefined : own, ahead);
          expect(times.keepUntil - AT).toBeLessThanOrEqual(longest);
        }
      }
    }
  });
});
