/**
 * The upstream guard around each fetch (docs/limits.md#the-upstream-guard): the circuit breaker and the company's 429
 * pause decide first, and answer fast when the upstream must be left alone: a failure the cache
 * turns into a stale copy when it has one (`fwd-status=503` or `429`), else 503 or 429 with
 * `Retry-After`. Then the upstream budget gives the request a slot (cluster-wide concurrency and
 * rate), or refuses it after a bounded wait. Each answer then feeds the breaker and the pause:
 * failures open the breaker, a 429 pauses the company.
 */

import type { Origin, OriginOutcome, ReadRequest } from '../cache/read/origin.js';
import { RateLimitedError, UpstreamUnavailableError } from '../errors/proxy-error.js';
import { pauseFromRetryAfter, secondsToWait } from '../http/retry-after.js';
import type { Metrics } from '../observability/metrics.js';
import type { CircuitBreaker } from '../upstream-guard/circuit-breaker.js';
import type { UpstreamBudget } from '../upstream-guard/upstream-budget.js';
import type { UpstreamPause } from '../upstream-guard/upstream-pause.js';

export interface GuardOptions {
  readonly breaker: CircuitBreaker;
  readonly pause: UpstreamPause;
  readonly budget: UpstreamBudget;
  /** Longest wait for an upstream slot, ms. */
  readonly maxQueueWaitMs: number;
  /** Told of every upstream 401: the token the proxy accepted was refused by the system of record. */
  readonly onUpstreamUnauthorized?: (request: ReadRequest) => void;
  readonly metrics?: Pick<Metrics, 'upstream' | 'upstreamRefused' | 'companySlot'>;
  readonly now?: () => number;
}

/** The longest a prefetch waits for a slot to spare: one answer of the shared ledger, ms. */
const SPARE_WAIT_MS = 100;

/** A prefetch refused (docs/cache.md#prefetch): a failure of its own, which no client ever sees. */
const NO_SPARE = {
  kind: 'failure',
  error: new UpstreamUnavailableError(1),
  fwdStatus: 503,
  upstreamMs: 0,
  spareRefused: true,
} as const satisfies OriginOutcome;

export function guardOrigin(fetch: Origin, options: GuardOptions): Origin {
  const { breaker, pause, budget, metrics } = options;
  const now = options.now ?? Date.now;
  return async (request, validators) => {
    const company = request.principal.company;
    // A prefetch never probes a breaker that is not closed, nor takes a slot a client waits for;
    // its refusals are counted as prefetches (src/cache/prefetch/prefetcher.ts), not as refused requests.
    // One that a client's request has joined is that request's fetch (src/cache/prefetch/prefetch-standing.ts).
    const prefetch = request.prefetch;
    if (prefetch?.spare === true && breaker.state !== 'closed') return NO_SPARE;
    const paused = await pause.check(company);
    if (paused.kind === 'paused' && prefetch?.spare === true) return NO_SPARE;
    if (paused.kind === 'paused') {
      metrics?.upstreamRefused('paused');
      return {
        kind: 'failure',
        error: new RateLimitedError(secondsToWait(paused.retryAfterMs), 'upstream'),
        fwdStatus: 429,
        upstreamMs: 0,
      };
    }
    const admitted = breaker.admit();
    if (!admitted.allowed) {
      metrics?.upstreamRefused('breaker');
      return {
        kind: 'failure',
        error: new UpstreamUnavailableError(secondsToWait(admitted.retryAfterMs)),
        fwdStatus: 503,
        upstreamMs: 0,
      };
    }
    const asked = performance.now();
    let granted: number | undefined;
    const job = (): Promise<OriginOutcome> => {
      granted = performance.now();
      return fetch(request, validators);
    };
    const slot =
      prefetch?.spare === true
        ? await budget.runSpare(
            job,
            Math.min(SPARE_WAIT_MS, options.maxQueueWaitMs),
            { whenPromoted: (promote) => prefetch.whenJoined(promote), waitMs: options.maxQueueWaitMs },
            company,
          )
        : await budget.run(job, options.maxQueueWaitMs, company);
    // A client's fill (a prefetch a client joined included) counts for its company's figures.
    if (prefetch?.spare !== true)
      metrics?.companySlot(company, slot.kind !== 'refused', ((granted ?? performance.now()) - asked) / 1000);
    if (slot.kind === 'refused' && prefetch?.spare === true) {
      if (paused.probe) await pause.resume(company);
      return NO_SPARE;
    }
    if (slot.kind === 'refused') {
      // The upstream's budget is spent for now: not a failure of the upstream, so not the breaker's.
      metrics?.upstreamRefused('budget');
      if (paused.probe) await pause.resume(company);
      return { kind: 'failure', error: new UpstreamUnavailableError(1), fwdStatus: 503, upstreamMs: 0 };
    }
    const outcome: OriginOutcome = slot.value;
    if (metrics !== undefined) {
      const resource = request.read.resource.name;
      if (outcome.kind === 'failure')
        metrics.upstream(resource, outcome.upstreamStatus ?? 'error', outcome.upstreamMs / 1000);
      else if (outcome.kind === 'not-modified') metrics.upstream(resource, 304, outcome.notModified.elapsedMs / 1000);
      else metrics.upstream(resource, outcome.answer.status, outcome.answer.elapsedMs / 1000);
    }
    if (outcome.kind === 'failure') breaker.failure();
    else breaker.success();
    if (outcome.kind === 'answer' && outcome.answer.status === 401) options.onUpstreamUnauthorized?.(request);
    if (outcome.kind === 'answer' && outcome.answer.status === 429) {
      await pause.pause(company, pauseFromRetryAfter(outcome.answer.retryAfter, now()));
    } else if (paused.probe) {
      await pause.resume(company);
    }
    return outcome;
  };
}
