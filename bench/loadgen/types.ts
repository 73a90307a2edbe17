/** What the load generator is given, what it records each second, and what it reports at the end. */
import type { WalkFigures } from '../lib/load/walkers.js';

export interface LoadOptions {
  readonly targetUrl: string;
  readonly adminUrls: readonly string[];
  readonly sandboxUrl: string | undefined;
  readonly secret: string;
  readonly seconds: number;
  readonly connections: number;
  /** Keyset walkers beside the readers (LOADTEST_WALKERS, 0: none), and what each spends on a page, ms. */
  readonly walkers?: number;
  readonly walkerThinkMs?: number;
  readonly write?: (line: string) => void;
}

/** One second of the run, as the per-second line shows it. */
export interface SecondSample {
  /** Seconds since the load started, at the end of this interval. */
  readonly at: number;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  readonly statuses: Readonly<Record<string, number>>;
  /** (hit + stale) / answers with a cache result, over the replicas, in this interval. */
  readonly hitRatio: number | undefined;
  readonly upstreamRequests: number;
}

export interface LoadtestResult {
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
  /** By class: 2xx, 3xx, 4xx, 5xx. */
  readonly statuses: Readonly<Record<string, number>>;
  /** By status code. */
  readonly statusCodes: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
  /** Over the replicas' answers to reads: (hit + stale) / all with a cache result. */
  readonly hitRatio: number | undefined;
  readonly coalescedWaits: number;
  readonly upstreamRequests: number;
  readonly upstreamRefusals: number;
  readonly redisErrors: number;
  /** What the sandbox served during the run, when its counters are reachable. */
  readonly sandboxServed: number | undefined;
  readonly timeline: readonly SecondSample[];
  /** The keyset walkers' figures (with walkers), and the replicas' prefetches by result over the run (when any). */
  readonly walks?: WalkFigures;
  readonly prefetches?: Readonly<Record<string, number>>;
}
