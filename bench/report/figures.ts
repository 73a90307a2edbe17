/**
 * What a run of `npm run bench` hands to its report: every phase's figures, and per target the
 * hit rounds' figures set against the bare server's in the same rounds.
 */
import type { BreakdownReport } from '../hit-breakdown.js';
import type { Summary } from '../lib/rounds.js';
import type { AdviceFigures } from '../phases/advice-accuracy.js';
import type { AllocationFigures } from '../phases/allocation.js';
import type { CoalescingFigures } from '../phases/coalescing.js';
import type { FreshnessRuns } from '../phases/freshness.js';
import type { HalfLoadFigures } from '../phases/half-load.js';
import type { HitFigures } from '../phases/hits.js';
import type { ManyCredentialsFigures } from '../phases/many-credentials.js';
import type { NeighbourFigures } from '../phases/noisy-neighbour.js';
import type { RateLimitedFigures } from '../phases/rate-limited.js';
import type { RedisLoadFigures } from '../phases/redis-load.js';
import type { ResumeFigures } from '../phases/resume.js';
import type { StoredBytesFigures } from '../phases/stored-bytes.js';
import type { BodyBytes } from '../phases/warm.js';
import { BARE, type HitRounds } from '../run/hit-rounds.js';
import type { BenchSetup } from '../run/settings.js';

export interface BenchRun extends HitRounds {
  readonly setup: BenchSetup;
  /** The pages' mean body bytes, identity and `br` (the warm phase). */
  readonly bodies: BodyBytes;
  readonly allocation: AllocationFigures;
  readonly resume: ResumeFigures;
  readonly rateLimited: RateLimitedFigures;
  readonly stored: StoredBytesFigures;
  readonly coalesced: CoalescingFigures;
  readonly neighbour: NeighbourFigures;
  readonly freshness: FreshnessRuns;
  readonly advice: AdviceFigures;
  readonly crowd: ManyCredentialsFigures;
  readonly redisLoad: RedisLoadFigures;
  readonly breakdown: BreakdownReport;
}

export interface TargetFigures {
  readonly name: string;
  readonly fiftyPages: Summary;
  readonly onePage: Summary;
  /** req/s over the bare server's (ratio of the medians). */
  readonly ratioFiftyPages: number;
  readonly ratioOnePage: number;
  /** The bare server's CPU per request over this target's: the ratio both would reach CPU-bound. */
  readonly cpuRatioFiftyPages: number;
  readonly cpuRatioOnePage: number;
  readonly halfLoadP99Ms: number;
  /** The paced generator's own schedule error in this target's half-load rounds, p99 (median of rounds). */
  readonly halfLoadGeneratorErrorP99Ms: number;
}

/** A target's figures, or undefined when it (or the bare server) was not measured. */
export function targetFigures(hits: HitFigures, half: HalfLoadFigures, name: string): TargetFigures | undefined {
  const own = hits.get(name);
  const base = hits.get(BARE);
  if (own === undefined || base === undefined) return undefined;
  return {
    name,
    fiftyPages: own['50 pages'].summary,
    onePage: own['one page'].summary,
    ratioFiftyPages: own['50 pages'].summary.rps / base['50 pages'].summary.rps,
    ratioOnePage: own['one page'].summary.rps / base['one page'].summary.rps,
    cpuRatioFiftyPages: base['50 pages'].summary.usPerRequest / own['50 pages'].summary.usPerRequest,
    cpuRatioOnePage: base['one page'].summary.usPerRequest / own['one page'].summary.usPerRequest,
    halfLoadP99Ms: half.byTarget.get(name)?.p99Ms ?? Number.NaN,
    halfLoadGeneratorErrorP99Ms: half.byTarget.get(name)?.generatorErrorP99Ms ?? Number.NaN,
  };
}

/** Every measured target's figures, in the hit rounds' order. */
export function targetRows(run: HitRounds): TargetFigures[] {
  return run.input.targets
    .map((t) => targetFigures(run.hits, run.half, t.name))
    .filter((row): row is TargetFigures => row !== undefined);
}
