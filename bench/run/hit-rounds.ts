/**
 * The hit rounds of `npm run bench`: every target in interleaved closed-loop rounds
 * (bench/phases/hits.ts), then paced at half the proxy's throughput (bench/phases/half-load.ts),
 * with the upstream and the anchors' origin counted around both: the origin is to be asked for
 * nothing meanwhile, the upstream for the refreshes of the pages that expire alone.
 */
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';
import { REFRESHING } from '../lib/bench-config.js';
import { envInt, envText } from '../lib/env.js';
import { say } from '../lib/format.js';
import { sandboxStats } from '../lib/http.js';
import type { Summary } from '../lib/rounds.js';
import { baselineServed } from '../lib/services.js';
import type { BenchContext, Page } from '../phases/context.js';
import { type HalfLoadFigures, runHalfLoad } from '../phases/half-load.js';
import { type HitFigures, type HitPhaseInput, type HitTarget, runHitPhase } from '../phases/hits.js';
import type { Anchors, Rig } from './rig.js';

export const BARE = 'bare node:http';
export const PROXY = 'proxy cache hits';
export const PROXY_BR = 'proxy br hits';
export const NGINX = 'nginx proxy_cache';
export const HAPROXY = 'HAProxy, the same job';

/**
 * What the hit rounds measure, one line per target: a server and the headers its requests carry
 * beyond each page's Authorization. A target whose server is not running (no nginx) is skipped.
 */
const HIT_TARGETS: readonly HitTarget[] = [
  { name: BARE, server: 'bare' },
  { name: NGINX, server: 'nginx' },
  { name: HAPROXY, server: 'haproxy' },
  { name: PROXY, server: 'proxy' },
  { name: PROXY_BR, server: 'proxy', headers: { 'accept-encoding': 'br' } },
  { name: 'proxy before', server: 'before' },
];

export interface HitRounds {
  /** The targets running in this run, their servers and pages. */
  readonly input: HitPhaseInput;
  readonly hits: HitFigures;
  readonly half: HalfLoadFigures;
  readonly upstreamDuringHits: number;
  /** The refreshes the refreshing pages may ask of the upstream meanwhile (`refreshesAllowed`). */
  readonly refreshesAllowed: number;
  readonly originDuringHits: number;
}

/**
 * The most refreshes the rounds may ask of the upstream in `seconds`: each refreshing page
 * (bench/lib/bench-config.ts, REFRESHING) once per stretch of freshness before its refresh point
 * (the shipped `cache.refresh.ahead`), and once more, per key prefix of a proxy measured (this
 * build's, and BENCH_BEFORE's).
 */
export function refreshesAllowed(pages: readonly Page[], seconds: number, prefixes: number): number {
  if (REFRESHING === undefined) return 0;
  const refreshing = pages.filter((page) => page.resource === REFRESHING?.resource).length;
  const stretch = REFRESHING.ttl * (1 - (BUILT_IN_CONFIG.cache.refresh?.ahead ?? 0));
  return refreshing * (Math.ceil(seconds / stretch) + 1) * prefixes;
}

export async function runHitRounds(
  ctx: BenchContext,
  rig: Rig,
  anchors: Anchors,
  pages: readonly Page[],
): Promise<HitRounds> {
  const { servers, origin } = anchors;
  const only = envText('BENCH_TARGETS')?.split(',');
  const targets = HIT_TARGETS.filter(
    (t) => servers[t.server] !== undefined && (only === undefined || t.server === 'bare' || only.includes(t.server)),
  );
  const input = { targets, servers, pages, bearer: rig.bearer, bare: BARE };
  const servedBefore = (await sandboxStats(rig.sandbox.url)).served;
  const originBefore = origin === undefined ? 0 : await baselineServed(origin.url);
  const started = performance.now();
  say(`hit phase (inbound limits on, shared through Redis, never refusing: every hit pays the shared limit decision)`);
  const hits = await runHitPhase(ctx, input);
  say();
  const half =
    envInt('BENCH_HALF_LOAD', 1, 0, 1) === 1
      ? await runHalfLoad(ctx, input, Math.max(1, Math.round(proxyHitsOf(hits).rps / 2)))
      : { rate: 0, rounds: 0, byTarget: new Map() };
  const upstreamDuringHits = (await sandboxStats(rig.sandbox.url)).served - servedBefore;
  const allowed = refreshesAllowed(pages, (performance.now() - started) / 1000, servers.before === undefined ? 1 : 2);
  const originDuringHits = origin === undefined ? 0 : (await baselineServed(origin.url)) - originBefore;
  say();
  say(
    `upstream requests during the hit and half-load rounds: ${String(upstreamDuringHits)} (refreshes only: at most ${String(allowed)})${origin === undefined ? '' : `; the anchors' origin: ${String(originDuringHits)} (they served hits only)`}`,
  );
  say();
  return { input, hits, half, upstreamDuringHits, refreshesAllowed: allowed, originDuringHits };
}

/** The proxy's hits over 50 pages: the rate the half-load phase paces at half of. */
function proxyHitsOf(hits: HitFigures): Summary {
  const proxyHits = hits.get(PROXY)?.['50 pages'].summary;
  if (proxyHits === undefined) throw new Error('no proxy figures');
  return proxyHits;
}

/** What a hit cost under load over 50 pages, the breakdown's yardstick: the proxy's and the bare server's. */
export function hitCosts(hits: HitFigures): {
  hitsPerSecond: number;
  proxyUsPerRequest: number;
  bareUsPerRequest: number;
} {
  const proxyHits = proxyHitsOf(hits);
  return {
    hitsPerSecond: proxyHits.rps,
    proxyUsPerRequest: proxyHits.usPerRequest,
    bareUsPerRequest: hits.get(BARE)?.['50 pages'].summary.usPerRequest ?? Number.NaN,
  };
}

/** The resume phase's targets: this build's servers, identity hits. */
export function resumeTargets(input: HitPhaseInput): HitTarget[] {
  return input.targets.filter((t) => t.server !== 'before' && t.headers === undefined);
}
