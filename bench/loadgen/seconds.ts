/**
 * The run second by second: each second's answers as they arrive (latency, statuses, errors),
 * closed with the replicas' hit ratio and upstream calls of that second from a scrape of their
 * `/metrics`, printed as one line and kept for the report's charts.
 */
import { fmt, fmtInt, fmtPercent } from '../lib/format.js';
import { LatencyHistogram } from '../lib/stats.js';
import { hitRatioBetween, isUpstreamSeries, scrape, sum, type Totals } from './counters.js';
import type { SecondSample } from './types.js';

/** The answers of one second as they arrive. */
interface Interval {
  readonly histogram: LatencyHistogram;
  readonly statuses: Record<string, number>;
  readonly startedAt: number;
  errors: number;
}

function newInterval(): Interval {
  return { histogram: new LatencyHistogram(), statuses: {}, startedAt: performance.now(), errors: 0 };
}

/** e.g. "t=  3.0 s    3,210 req/s  p50 4.10 ms  p99 35.20 ms  errors 0  hit 97.3%  upstream 12". */
export function formatSecond(sample: SecondSample): string {
  return (
    `  t=${fmt(sample.at, 1).padStart(5)} s  ${fmtInt(sample.requestsPerSecond).padStart(7)} req/s  p50 ${fmt(sample.p50Ms)} ms  p99 ${fmt(sample.p99Ms)} ms  ` +
    `errors ${String(sample.errors)}  hit ${fmtPercent(sample.hitRatio)}  upstream ${String(sample.upstreamRequests)}`
  );
}

export class SecondsRecorder {
  readonly #adminUrls: readonly string[];
  readonly #write: (line: string) => void;
  #second = newInterval();
  readonly timeline: SecondSample[] = [];
  readonly #startedAt = performance.now();
  #previousTotals: Totals;
  /** The seconds' scrapes, in order. */
  #samples = Promise.resolve();

  /** `before`: the replicas' counters when the load starts. */
  constructor(adminUrls: readonly string[], before: Totals, write: (line: string) => void) {
    this.#adminUrls = adminUrls;
    this.#previousTotals = before;
    this.#write = write;
  }

  answered(responseTime: number, code: string): void {
    this.#second.histogram.record(responseTime);
    this.#second.statuses[code] = (this.#second.statuses[code] ?? 0) + 1;
  }

  failed(): void {
    this.#second.errors += 1;
  }

  /**
   * Closes the current interval: client figures now, server figures from a scrape (in order).
   * The run's last, partial interval counts only if answers arrived in it.
   */
  close(last: boolean): void {
    const closing = this.#second;
    this.#second = newInterval();
    const now = this.#second.startedAt;
    const intervalSec = (now - closing.startedAt) / 1000;
    if (last && closing.histogram.count === 0) return;
    this.#samples = this.#samples.then(async () => {
      const totals = await scrape(this.#adminUrls).catch(() => this.#previousTotals);
      const sample: SecondSample = {
        at: (now - this.#startedAt) / 1000,
        requests: closing.histogram.count,
        requestsPerSecond: closing.histogram.count / intervalSec,
        p50Ms: closing.histogram.percentileMs(50),
        p90Ms: closing.histogram.percentileMs(90),
        p99Ms: closing.histogram.percentileMs(99),
        maxMs: closing.histogram.maxMs,
        errors: closing.errors,
        statuses: closing.statuses,
        hitRatio: hitRatioBetween(this.#previousTotals, totals),
        upstreamRequests: sum(this.#previousTotals, totals, isUpstreamSeries),
      };
      this.#previousTotals = totals;
      this.timeline.push(sample);
      this.#write(formatSecond(sample));
    });
  }

  /** Resolves when every closed second is scraped and printed. */
  done(): Promise<void> {
    return this.#samples;
  }
}
