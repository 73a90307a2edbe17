/**
 * The hit rounds of `npm run bench`: every target in interleaved closed-loop rounds
 * (bench/phases/hits.ts), then paced at half the proxy's throughput (bench/phases/half-load.ts),
 * with the upstream and nginx's origin counted around both: neither is to be asked for anything
 * meanwhile.
 */
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

/**
 * What the hit rounds measure, one line per target: a server and the headers its requests carry
 * beyond each page's Authorization. A target whose server is not running (no nginx) is skipped.
 */
const HIT_TARGETS: readonly HitTarget[] = [
  { name: BARE, server: 'bare' },
  { name: NGINX, server: 'nginx' },
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
  readonly originDuringHits: number;
}

export async function runHitRounds(
  ctx: BenchContext,
  rig: Rig,
  anchors: Anchors,
  pages: readonly Page[],
): Promise<HitRounds> {
  const { servers, origin } = anchors;
  const targets = HIT_TARGETS.filter((t) => servers[t.server] !== undefined);
  const input = { targets, servers, pages, bearer: rig.bearer, bare: BARE };
  const servedBefore = (await sandboxStats(rig.sandbox.url)).served;
  const originBefore = origin === undefined ? 0 : await baselineServed(origin.url);
  say(`hit phase (inbound limits on, shared through Redis, never refusing: every hit pays the shared limit decision)`);
  const hits = await runHitPhase(ctx, input);
  say();
  const half = await runHalfLoad(ctx, input, Math.max(1, Math.round(proxyHitsOf(hits).rps / 2)));
  const upstreamDuringHits = (await sandboxStats(rig.sandbox.url)).served - servedBefore;
  const originDuringHits = origin === undefined ? 0 : (await baselineServed(origin.url)) - originBefore;
  say();
  say(
    `upstream requests during the hit and half-load rounds: ${String(upstreamDuringHits)} (target 0)${origin === undefined ? '' : `; nginx's origin: ${String(originDuringHits)} (nginx served hits only)`}`,
  );
  say();
  return { input, hits, half, upstreamDuringHits, originDuringHits };
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
