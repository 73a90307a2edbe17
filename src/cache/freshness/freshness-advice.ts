/**
 * The model behind the freshness advice (docs/cache.md#freshness-advice): a page changes upstream
 * as a Poisson process of rate λ (changes per second), and a cached copy is fetched, then served
 * as the read service serves it: fresh for its TTL t, refreshed by a read past its refresh point,
 * served stale while that refresh runs. From the refreshes a replica made it estimates λ and how
 * long a copy outlives its refresh point, and from them and the policy what share of reads are
 * served stale, how stale they are on average, and which TTL meets a target staleness.
 * Pure arithmetic: nothing here holds state or reads a clock; the counts come from the ledger
 * (freshness-ledger.ts).
 */
import type { ResourceName } from '../../catalog/resources.js';

/** The target staleness of a read when the operator names none, seconds. */
export const DEFAULT_TARGET_SECONDS = 5;
/** The longest target staleness the advice takes, seconds: a day. */
export const MAX_TARGET_SECONDS = 86_400;
/** The TTLs the advice suggests, seconds: a whole second at least, a day at most. */
export const MIN_SUGGESTED_TTL = 1;
export const MAX_SUGGESTED_TTL = 86_400;

/** What a window's refreshes of held pages saw: how many, how many found a change, and held how long. */
export interface RefreshSample {
  readonly refreshes: number;
  readonly changed: number;
  /** The time the refreshed copies had been held (since stored or last confirmed), summed, seconds. */
  readonly heldSeconds: number;
}

/**
 * The change rate λ, changes per second; undefined without a refresh to judge by.
 *
 * A refresh after a copy was held h seconds finds a change with probability 1 - e^{-λh}: it sees
 * whether the page changed, never how often. The naive c / Σh counts each refresh that found a
 * change as one change, and so underestimates λ once changes come about as often as refreshes;
 * the maximum-likelihood -ln(1 - c/n) / mean(h) undoes that, but is infinite when every refresh
 * found a change and biased upward for small n. This is Cho and Garcia-Molina's bias-reduced form
 * of it ("Estimating frequency of change", ACM TOIT 2003): λ ≈ -ln((n - c + 0.5) / (n + 0.5)) / mean(h),
 * finite for c = n (a lower bound then), and c / Σh to first order when c is small against n. The
 * refreshes' held times differ (a refresh waits for a read after the TTL); their mean stands in for
 * the single interval the estimator assumes, which is exact when they are alike.
 */
export function changeRate(sample: RefreshSample): number | undefined {
  const { refreshes: n, changed: c, heldSeconds } = sample;
  if (n <= 0 || heldSeconds <= 0) return undefined;
  if (c <= 0) return 0;
  const meanHeld = heldSeconds / n;
  return -Math.log((n - c + 0.5) / (n + 0.5)) / meanHeld;
}

/**
 * A read missing a change younger than this is not counted stale, seconds: the bench's judge of a
 * stale answer (STALE_AFTER_MS in bench/lib/freshness-figures.ts, docs/benchmarks.md#freshness),
 * so that the estimate and the measured share count the same reads.
 */
export const STALE_AFTER_SECONDS = 1;

/** How a resource's copies are served, seconds (docs/cache.md: freshness, refresh ahead). */
export interface ServingPolicy {
  /** The freshness lifetime in force. */
  readonly ttl: number;
  /** How long past it a copy is served while one refresh runs: stale-while-revalidate. */
  readonly staleWindow: number;
  /** The last fraction of the lifetime in which a read refreshes a copy ahead (`cache.refresh.ahead`). */
  readonly ahead: number;
}

/** A copy's cycle: its policy, and how long it outlives its refresh point. */
export interface CopyCycle extends ServingPolicy {
  /**
   * The mean time from a copy's refresh point to the refreshed copy, seconds: the wait for a read
   * past the point, and the refresh's own time (the ledger's measure of the readers).
   */
  readonly wait: number;
}

/**
 * The share of reads served stale (missing a change older than `grace`) at change rate `rate`, as
 * read-service.ts serves a copy (docs/cache.md#freshness-advice). A copy serves fresh hits until
 * its refresh point P = t(1 - ahead/2) (refresh-ahead.ts's point, averaged over pages); the first
 * read past P starts one refresh and is served the copy (stale-while-revalidate once past t); the
 * refreshed copy replaces it X later: that read's wait and the refresh, taken as exponential with
 * the measured mean m. A read past t + staleWindow waits for the fill, and is fresh. Reads come as
 * a Poisson stream, so they see time averages (PASTA), and by renewal-reward the share is
 * E[∫ s(a) da over the cycle] / E[cycle], the cycle being P + X and s(a) = 1 - e^{-λ(a - grace)}
 * the chance that a read at age a misses a change older than the grace (0 before the grace and
 * past t + staleWindow): (∫_0^P s + ∫_P^{t+staleWindow} s(a) e^{-(a-P)/m} da) / (P + m).
 * A TTL of 0 keeps nothing, so serves nothing stale.
 */
export function staleReadShare(rate: number, cycle: CopyCycle, grace = STALE_AFTER_SECONDS): number {
  const { ttl, staleWindow, ahead, wait } = cycle;
  if (rate <= 0 || ttl <= 0) return 0;
  const point = ttl * (1 - ahead / 2);
  const servedUntil = ttl + staleWindow;
  const wanting = Math.max(0, wait);
  const stale = staleUntil(rate, point - grace) + staleWhileWaiting(rate, point, wanting, servedUntil, grace);
  return stale / (point + wanting);
}

/**
 * ∫_0^y (1 - e^{-λv}) dv = y - (1 - e^{-λy}) / λ: the stale reads of the span `y` seconds past the
 * grace of a copy's life (0 for none), per read a second.
 */
function staleUntil(rate: number, y: number): number {
  if (y <= 0) return 0;
  const x = rate * y;
  // The series where y - (1 - e^{-x})/λ would cancel to nothing in floating point.
  if (x < 1e-4) return y * (x / 2 - (x * x) / 6 + (x * x * x) / 24);
  return y + Math.expm1(-x) / rate;
}

/**
 * E[∫_P^{P+X} s(a) da] for X exponential of mean `wait`, s cut at `servedUntil`: ∫ s(a) e^{-(a-P)/m}
 * da from `from` = max(P, grace) on. With a = from + v, s(a) = before + (1 - before)(1 - e^{-λv}),
 * `before` the chance a change came by `from`, so the integral is closed.
 */
function staleWhileWaiting(rate: number, point: number, wait: number, servedUntil: number, grace: number): number {
  const from = Math.max(point, grace);
  const span = servedUntil - from;
  if (wait <= 0 || span <= 0) return 0;
  const k = 1 / wait;
  const reached = Math.exp(-k * (from - point));
  const before = -Math.expm1(-rate * (from - grace));
  const within = -Math.expm1(-k * span) / k;
  const changing = within + Math.expm1(-(rate + k) * span) / (rate + k);
  return reached * (before * within + (1 - before) * changing);
}

/**
 * The expected staleness of a read, seconds: how long the copy served has been out of date (0 for
 * a read of an unchanged page). For a read at u, the first change after the fetch came at s < u
 * with density λe^{-λs}, so the read is u - s stale: E[u] = u - (1 - e^{-λu})/λ. Averaged over a
 * uniform u in [0, t]: E(t) = t/2 - 1/λ + (1 - e^{-λt}) / (λ²t), about λt²/6 for λt small and
 * t/2 - 1/λ for λt large. It rises with t, from 0 without bound. It keeps the plain cycle (a copy
 * served for t, then replaced at once, no grace): the suggested TTL does not count the readers'
 * wait or the stale window, which `staleReadShare` does (docs/cache.md#freshness-advice).
 */
export function expectedStaleness(rate: number, ttl: number): number {
  const x = rate * ttl;
  if (x <= 0) return 0;
  // E(t) = (x/2 - 1 + (1 - e^{-x})/x) / λ; its terms cancel for small x, where the series holds.
  if (x < 1e-2) return ((x * x) / 6 - (x * x * x) / 24 + (x * x * x * x) / 120) / rate;
  return (x / 2 - 1 - Math.expm1(-x) / x) / rate;
}

/**
 * The longest whole-second TTL whose expected staleness of a read (`expectedStaleness`) is at most
 * `target` seconds, within [MIN_SUGGESTED_TTL, MAX_SUGGESTED_TTL]. The expected staleness is the
 * figure the target bounds: it weighs both how many reads are stale and for how long, so a page that
 * changes rarely earns a long TTL and one that changes every few seconds a short one. E(t) rises
 * with t and lies between t/2 - 1/λ and t/2, so the TTL sought lies in [2·target, 2·(target + 1/λ)],
 * where bisection finds it.
 */
export function suggestedTtl(rate: number, target: number): number {
  if (rate <= 0) return MAX_SUGGESTED_TTL;
  let low = Math.min(2 * target, MAX_SUGGESTED_TTL);
  let high = Math.min(2 * (target + 1 / rate), MAX_SUGGESTED_TTL);
  if (expectedStaleness(rate, high) <= target) return clampTtl(high);
  // E(low) <= target < E(high): halve the interval until it is well under a second.
  for (let round = 0; round < 64 && high - low > 1e-3; round++) {
    const middle = (low + high) / 2;
    if (expectedStaleness(rate, middle) <= target) low = middle;
    else high = middle;
  }
  const whole = Math.floor(low);
  return clampTtl(expectedStaleness(rate, whole + 1) <= target ? whole + 1 : whole);
}

/** A TTL in whole seconds (down: the target is a bound), within the suggested range. */
function clampTtl(seconds: number): number {
  return Math.min(MAX_SUGGESTED_TTL, Math.max(MIN_SUGGESTED_TTL, Math.floor(seconds)));
}

/** What one resource's fills in the window came to: the ledger's counts, summed over its minutes. */
export interface WindowTotals {
  /** First fills: nothing was held. */
  readonly fills: number;
  readonly refreshes: number;
  /** Refreshes that found the page unchanged: a 304, or a 200 with the stored body. */
  readonly unchanged: number;
  readonly changed: number;
  readonly heldSeconds: number;
  /**
   * How long each refreshed copy outlived its refresh point (its TTL's end, or its refresh-ahead
   * point), summed, seconds: the wait for a read past it, and the refresh.
   */
  readonly waitedSeconds: number;
  /** The resource's reads in the window, when they are counted (hits, stale, misses). */
  readonly reads?: number | undefined;
  /** Body bytes the upstream sent, every fill. */
  readonly bytes: number;
  /** Refreshes whose answer carried a later `Last-Modified` than the copy held, and the gaps summed. */
  readonly lastModifiedChanges: number;
  readonly lastModifiedSeconds: number;
}

/** The advice for one resource (`GET /admin/cache/freshness`, `npm run advise`). */
export interface ResourceFreshness {
  readonly resource: ResourceName;
  readonly ttlSeconds: number;
  readonly refreshesPerMinute: number;
  readonly fillsPerMinute: number;
  /** Unchanged refreshes over refreshes; null without a refresh. */
  readonly unchangedShare: number | null;
  readonly upstreamBytesPerMinute: number;
  /** 1/λ; null until a refresh has found a change. */
  readonly changeIntervalSeconds: number | null;
  /** The mean of a refreshed copy's wait past its refresh point (`CopyCycle.wait`); null without a refresh. */
  readonly refreshWaitSeconds: number | null;
  /** Reads served stale under the policy in force (`staleReadShare`); null without a refresh. */
  readonly staleShareEstimate: number | null;
  /** The TTL meeting the target (`suggestedTtl`); null until a refresh has found a change. */
  readonly suggestedTtlSeconds: number | null;
  /** The mean gap between distinct `Last-Modified` values of a page; null when none was seen. */
  readonly lastModifiedIntervalSeconds: number | null;
  /** Why a figure is missing or to be read with care; null when there is nothing to say. */
  readonly note: string | null;
}

export const NO_REFRESH_NOTE = 'no refresh seen yet: nothing to judge the TTL by';
export const NO_CHANGE_NOTE = 'no change seen: the TTL can grow';
export const ALWAYS_CHANGED_NOTE = 'every refresh found a change: changes may come more often than shown';

/**
 * The mean wait past a copy's refresh point as the readers meet it (`CopyCycle.wait`), seconds.
 * Measured per refresh it leans to the pages read least: they wait longest, and are refreshed about
 * as often as the hot ones. With the reads counted it is weighed by reads instead: a page read at
 * rate r waits about 1/r past its point and serves each copy it holds for H to r·H reads, so the
 * copies' held time over the reads, ΣH / Σ r·H, is 1/r averaged over the reads. Never more than the
 * mean per refresh (the reads also count pages filled, not refreshed, in the window).
 */
function readersWait(totals: WindowTotals): number | undefined {
  if (totals.refreshes === 0) return undefined;
  const byRefreshes = totals.waitedSeconds / totals.refreshes;
  if (totals.reads === undefined || totals.reads <= totals.refreshes) return byRefreshes;
  return Math.min(byRefreshes, totals.heldSeconds / totals.reads);
}

/** A resource's advice from its window's totals, the policy in force and the target staleness. */
export function adviceFor(
  resource: ResourceName,
  totals: WindowTotals,
  serving: ServingPolicy,
  targetSeconds: number,
  windowMinutes: number,
): ResourceFreshness {
  const rate = changeRate({ refreshes: totals.refreshes, changed: totals.changed, heldSeconds: totals.heldSeconds });
  const changing = rate !== undefined && totals.changed > 0;
  const wait = readersWait(totals);
  return {
    resource,
    ttlSeconds: serving.ttl,
    refreshesPerMinute: totals.refreshes / windowMinutes,
    fillsPerMinute: totals.fills / windowMinutes,
    unchangedShare: totals.refreshes === 0 ? null : totals.unchanged / totals.refreshes,
    upstreamBytesPerMinute: totals.bytes / windowMinutes,
    changeIntervalSeconds: changing ? 1 / rate : null,
    refreshWaitSeconds: wait ?? null,
    staleShareEstimate: rate === undefined || wait === undefined ? null : staleReadShare(rate, { ...serving, wait }),
    suggestedTtlSeconds: changing ? suggestedTtl(rate, targetSeconds) : null,
    lastModifiedIntervalSeconds:
      totals.lastModifiedChanges === 0 ? null : totals.lastModifiedSeconds / totals.lastModifiedChanges,
    note: noteFor(totals),
  };
}

function noteFor(totals: WindowTotals): string | null {
  if (totals.refreshes === 0) return NO_REFRESH_NOTE;
  if (totals.changed === 0) return NO_CHANGE_NOTE;
  if (totals.changed === totals.refreshes) return ALWAYS_CHANGED_NOTE;
  return null;
}
