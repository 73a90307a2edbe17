/** Retry-After → pause: seconds, HTTP dates, garbage, all bounded. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_PAUSE_MS, MAX_PAUSE_MS, pauseFromRetryAfter } from '../../src/http/retry-after.js';
import { CircuitBreaker } from '../../src/upstream-guard/circuit-breaker.js';

const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);

describe('pauseFromRetryAfter', () => {
  it.each([
    ['7', 7_000],
    [' 30 ', 30_000],
    [new Date(NOW + 20_000).toUTCString(), 20_000],
    ['0', 1_000], // the upstream did just answer 429: at least a moment
    [new Date(NOW - 60_000).toUTCString(), 1_000],
    ['86400', MAX_PAUSE_MS],
    ['soon', DEFAULT_PAUSE_MS],
    ['-5', DEFAULT_PAUSE_MS],
    ['1.5', DEFAULT_PAUSE_MS],
    ['Sunday, 22-Nov-26 12:00:45 GMT', 45_000],
    ['Sun Nov 22 12:00:30 2026', 30_000],
    ['', DEFAULT_PAUSE_MS],
    [undefined, DEFAULT_PAUSE_MS],
  ])('%s → %i ms', (header, ms) => {
    expect(pauseFromRetryAfter(header, NOW)).toBe(ms);
  });
});

describe('CircuitBreaker', () => {
  it('opens after N failures in a row, fails fast, lets one probe through, and closes on its success', () => {
    let now = 0;
    const states: string[] = [];
    const breaker = new CircuitBreaker({
      failures: 3,
      openForMs: 10_000,
      now: () => now,
      onChange: (s) => states.push(s),
    });
    breaker.failure();
    breaker.failure();
    breaker.success(); // the run is broken: the count starts again
    breaker.failure();
    breaker.failure();
    expect(breaker.state).toBe('closed');
    breaker.failure();
    expect(breaker.state).toBe('open');
    expect(breaker.admit()).toEqual({ allowed: false, retryAfterMs: 10_000 });
    now += 10_000;
    expect(breaker.admit()).toEqual({ allowed: true }); // the probe
    expect(breaker.admit().allowed).toBe(false); // only one
    breaker.success();
    expect(breaker.state).toBe('closed');
    expect(breaker.admit()).toEqual({ allowed: true });
    expect(states).toEqual(['open', 'half-open', 'closed']);
  });

  it('opens again when the probe fails', () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failures: 1, openForMs: 5_000, now: () => now });
    breaker.failure();
    now += 5_000;
    expect(breaker.admit().allowed).toBe(true);
    breaker.failure();
    expect(breaker.state).toBe('open');
    expect(breaker.admit()).toEqual({ allowed: false, retryAfterMs: 5_000 });
  });
});
