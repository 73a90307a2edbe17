/**
 * The upstream guard around each fetch (docs/limits.md#the-upstream-guard): the circuit breaker and the company's 429
 * pause decide first, and answer fast when the upstream must be left alone: a failure the cache
 * turns into a stale copy when it has one (`fwd-status=503` or `429`), else 503 or 429 with
 * `Retry-After`. Then the upstream budget gives the request a slot (cluster-wide concurrency and
 * rate), or refuses it after a bounded wait. Each answer then feeds the breaker and the pause:
 * failures open the breaker, a 429 pauses the company.
 */

import type { Origin, OriginOutcome, ReadRequest, Validators } from '../cache/read/origin.js';
import { RateLimitedError, UpstreamUnavailableError } from '../errors/proxy-error.js';
import { pauseFromRetryAfter, secondsToWait } from '../http/retry-after.js';
import type { Metrics } from '../observability/metrics.js';
import type { CircuitBreaker } from '../upstream-guard/circuit-breaker.js';
import type { BudgetResult, UpstreamBudget } from '../upstream-guard/upstream-budget.js';
import type { PauseCheck, UpstreamPause } from '../upstream-guard/upstream-pause.js';

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
  const guard = new OriginGuard(fetch, options);
  return (request, validators) => guard.fetch(request, validators);
}

/**
 * One fetch through the guard. A prefetch (`spare`) never probes a breaker that is not closed, nor
 * takes a slot a client waits for; its refusals are counted as prefetches
 * (src/cache/prefetch/prefetcher.ts), not as refused requests. One that a client's request has
 * joined is that request's fetch (src/cache/prefetch/prefetch-standing.ts).
 */
class OriginGuard {
  readonly #fetch: Origin;
  readonly #options: GuardOptions;
  readonly #now: () => number;

  constructor(fetch: Origin, options: GuardOptions) {
    this.#fetch = fetch;
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  async fetch(request: ReadRequest, validators: Validators | undefined): Promise<OriginOutcome> {
    const { breaker, pause, metrics } = this.#options;
    const company = request.principal.company;
    // Read at each step: a prefetch a client joins meanwhile is that request's fetch from then on.
    const spare = (): boolean => request.prefetch?.spare === true;
    if (spare() && breaker.state !== 'closed') return NO_SPARE;
    const paused = await pause.check(company);
    const refusal = this.#refusal(paused, spare());
    if (refusal !== undefined) return refusal;
    const probe = paused.kind === 'go' && paused.probe;
    const slot = await this.#slot(request, validators);
    if (slot.kind === 'refused') {
      const refusedSpare = spare();
      // The upstream's budget is spent for now: not a failure of the upstream, so not the breaker's.
      if (!refusedSpare) metrics?.upstreamRefused('budget');
      if (probe) await pause.resume(company);
      if (refusedSpare) return NO_SPARE;
      return { kind: 'failure', error: new UpstreamUnavailableError(1), fwdStatus: 503, upstreamMs: 0 };
    }
    await this.#learn(request, slot.value, probe);
    return slot.value;
  }

  /** The company's 429 pause, then the breaker: a fast refusal when the upstream must be left alone. */
  #refusal(paused: PauseCheck, spare: boolean): OriginOutcome | undefined {
    const { breaker, metrics } = this.#options;
    if (paused.kind === 'paused') {
      if (spare) return NO_SPARE;
      metrics?.upstreamRefused('paused');
      const error = new RateLimitedError(secondsToWait(paused.retryAfterMs), 'upstream');
      return { kind: 'failure', error, fwdStatus: 429, upstreamMs: 0 };
    }
    const admitted = breaker.admit();
    if (admitted.allowed) return undefined;
    metrics?.upstreamRefused('breaker');
    const error = new UpstreamUnavailableError(secondsToWait(admitted.retryAfterMs));
    return { kind: 'failure', error, fwdStatus: 503, upstreamMs: 0 };
  }

  /** The fetch in a slot of the upstream budget: a client's within its wait, a prefetch's only to spare. */
  async #slot(request: ReadRequest, validators: Validators | undefined): Promise<BudgetResult<OriginOutcome>> {
    const { budget, metrics, maxQueueWaitMs } = this.#options;
    const company = request.principal.company;
    const prefetch = request.prefetch;
    const asked = performance.now();
    let granted: number | undefined;
    const job = (): Promise<OriginOutcome> => {
      granted = performance.now();
      return this.#fetch(request, validators);
    };
    const slot =
      prefetch?.spare === true
        ? await budget.runSpare(
            job,
            Math.min(SPARE_WAIT_MS, maxQueueWaitMs),
            { whenPromoted: (promote) => prefetch.whenJoined(promote), waitMs: maxQueueWaitMs },
            company,
          )
        : await budget.run(job, maxQueueWaitMs, company);
    // A client's fill (a prefetch a client joined while it waited included) counts for its company's figures.
    if (prefetch?.spare !== true)
      metrics?.companySlot(company, slot.kind !== 'refused', ((granted ?? performance.now()) - asked) / 1000);
    return slot;
  }

  /** What the answer teaches the guard: the upstream's figures, the breaker's count, the company's pause. */
  async #learn(request: ReadRequest, outcome: OriginOutcome, probe: boolean): Promise<void> {
    const { breaker, pause, metrics } = this.#options;
    const company = request.principal.company;
    if (metrics !== undefined) {
      const resource = request.read.resource.name;
      if (outcome.kind === 'failure')
        metrics.upstream(resource, outcome.upstreamStatus ?? 'error', outcome.upstreamMs / 1000);
      else if (outcome.kind === 'not-modified') metrics.upstream(resource, 304, outcome.notModified.elapsedMs / 1000);
      else metrics.upstream(resource, outcome.answer.status, outcome.answer.elapsedMs / 1000);
    }
    if (outcome.kind === 'failure') breaker.failure();
    else breaker.success();
    if (outcome.kind === 'answer' && outcome.answer.status === 401) this.#options.onUpstreamUnauthorized?.(request);
    if (outcome.kind === 'answer' && outcome.answer.status === 429) {
      await pause.pause(company, pauseFromRetryAfter(outcome.answer.retryAfter, this.#now()));
    } else if (probe) {
      await pause.resume(company);
    }
  }
}
