/** What every phase of `npm run bench` is given: settings, the generator, the scratch directory, the warmed pages. */
import type { ClosedLoopGenerator } from '../lib/load/generators.js';
import type { LoadRequest } from '../lib/load/types.js';

export interface BenchSettings {
  /** Interleaved rounds per target and workload (BENCH_ROUNDS). */
  readonly rounds: number;
  /** Seconds per round (BENCH_SECONDS). */
  readonly seconds: number;
  /** Connections of the closed-loop generator (BENCH_CONNECTIONS). */
  readonly connections: number;
  /** Seconds of load per target before its rounds (BENCH_WARMUP_SECONDS). */
  readonly warmupSeconds: number;
  /**
   * Seconds of the round's own load, unmeasured, just before each measured round (BENCH_LEAD_SECONDS):
   * a target idle while the others ran may hold pages past their stale window, whose first reads
   * are revalidations, not hits; the lead-in takes them, so that a round measures hits with
   * refreshes running. The first seconds after an idle spell are the resume phase's.
   */
  readonly leadSeconds: number;
}

export interface BenchContext {
  readonly settings: BenchSettings;
  readonly generator: ClosedLoopGenerator;
  /** Servers and generators each on their own CPU (taskset, two CPUs or more). */
  readonly pinned: boolean;
  readonly workDir: string;
}

/** A page the proxy serves from its cache, as the upstream sent it. */
export interface Page {
  readonly company: string;
  readonly resource: string;
  /** Path and query as a client sends it (canonical: sorted, per_page explicit). */
  readonly path: string;
  readonly query: string;
  readonly body: Buffer;
}

/** The requests for `pages`, each with its company's token, plus any extra headers. */
export function requestsFor(
  pages: readonly Page[],
  bearer: (company: string) => string,
  headers: Readonly<Record<string, string>> = {},
): LoadRequest[] {
  return pages.map((page) => ({ path: page.path, headers: { authorization: bearer(page.company), ...headers } }));
}
