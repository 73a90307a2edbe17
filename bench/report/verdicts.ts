/**
 * The targets of `npm run bench` (docs/benchmarks.md#targets) and the verdicts of the hit rounds
 * and the phases on the same servers: hits against the bare server by req/s and by CPU, p99
 * against HAProxy's and nginx's at full load and nginx's at half load, `br` hits, the upstream
 * during the rounds, coalescing,
 * stored bytes, the 429 path, the first second after an idle spell, and what a hit allocates.
 */
import { fmt, fmtInt } from '../lib/format.js';
import type { AllocationFigures } from '../phases/allocation.js';
import { type RedisLoadFigures, TARGET_COMMANDS_PER_HOT_PAGE } from '../phases/redis-load.js';
import type { TargetFigures } from './figures.js';

/** The targets (docs/benchmarks.md#targets). */
export const TARGETS = {
  /** Cache hits against the bare server, closed loop (wrk), on 50 pages and on one page. */
  hitRatio: 0.7,
  /** A hit's CPU against the bare server's per answer, at most (the same goal, read by CPU). */
  hitCpuVersusBare: 1.45,
  /** Bytes a hit allocates against the bare server's per answer, at most. */
  allocationVersusBare: 1.5,
  /** In the steady run of the allocation phase: no young-generation pause longer, no full collection. */
  longestYoungPauseMs: 3,
  /** The first second after an idle spell against the steady seconds after it (p99). */
  resumeVersusSteady: 2,
  /** The proxy's p99 at full load against HAProxy's and nginx's in the same rounds, over 50 pages and one. */
  p99VersusAnchors: 2,
  /** The proxy's p99 at half load against nginx's at the same rate, in the same rounds. */
  halfLoadVersusNginx: 2,
  /**
   * The half-load phase judges only when its ruler is shorter than what it measures: the anchors'
   * p99 (bare and nginx) within this, and the generator's own schedule error (p99) within the next.
   */
  halfLoadAnchorP99Ms: 2,
  generatorErrorP99Ms: 1,
  /** A `br` hit's bytes per answer against an identity hit's, over 50 pages. */
  brBytesRatio: 0.2,
} as const;

export interface Verdict {
  readonly target: string;
  readonly figure: string;
  /** undefined: could not be judged in this run (e.g. no nginx). */
  readonly pass: boolean | undefined;
}

export interface VerdictInput {
  readonly proxy: TargetFigures;
  /** The proxy's hits with `Accept-Encoding: br`, when measured. */
  readonly proxyBr?: TargetFigures | undefined;
  /** The pages' mean body bytes, identity and `br` (the warm phase). */
  readonly bodies?: { readonly identity: number; readonly br: number } | undefined;
  readonly nginx: TargetFigures | undefined;
  /** HAProxy doing the proxy's job by configuration (bench/haproxy-cache.cfg), when installed. */
  readonly haproxy?: TargetFigures | undefined;
  readonly bare: TargetFigures | undefined;
  /** Upstream requests during the hit rounds, and the refreshes of the pages that expire meanwhile. */
  readonly upstream: { readonly requests: number; readonly allowed: number };
  readonly coalesced: { readonly requests: number; readonly upstream: number; readonly pass: boolean };
  readonly stored: { readonly ratio: number; readonly target: number; readonly pass: boolean };
  readonly rateLimited: {
    readonly usPerRequest: number;
    readonly target: number;
    readonly other: number;
    readonly pass: boolean;
  };
  /** The closed-loop generator, e.g. "wrk 4.1.0". */
  readonly generator: string;
  /** The allocation phase's figures (bench/phases/allocation.ts), when it ran. */
  readonly allocation?: AllocationFigures | undefined;
  /** The resume phase's figures for the proxy (bench/phases/resume.ts), when it ran. */
  readonly resume?:
    | { readonly idleSeconds: number; readonly firstP99Ms: number; readonly steadyP99Ms: number }
    | undefined;
}

/** Bytes allocated per answer against the bare server's; the collector's pauses in the steady run. */
function allocationVerdicts(allocation: AllocationFigures | undefined): Verdict[] {
  const bytes = `bytes allocated per hit ≤ ${String(TARGETS.allocationVersusBare)}× bare's per answer`;
  const pauses = `no young pause over ${String(TARGETS.longestYoungPauseMs)} ms, no full collection, in the steady hits`;
  if (allocation === undefined)
    return [
      { target: bytes, figure: 'not measured in this run', pass: undefined },
      { target: pauses, figure: 'not measured in this run', pass: undefined },
    ];
  const { bare, proxy } = allocation;
  const ratio = proxy.bytesPerAnswer / bare.bytesPerAnswer;
  return [
    {
      target: bytes,
      figure: `${fmtInt(proxy.bytesPerAnswer)} vs ${fmtInt(bare.bytesPerAnswer)} B (${fmt(ratio, 2)}×); promoted ${fmt(proxy.promotedPerAnswer, 1)} vs ${fmt(bare.promotedPerAnswer, 1)} B`,
      pass: ratio <= TARGETS.allocationVersusBare,
    },
    {
      target: pauses,
      figure: `${String(proxy.seconds)} s: longest young pause ${fmt(proxy.longestScavengeMs)} ms over ${fmtInt(proxy.scavenges)}; ${fmtInt(proxy.fullCollections)} full`,
      pass: proxy.longestScavengeMs <= TARGETS.longestYoungPauseMs && proxy.fullCollections === 0,
    },
  ];
}

function resumeVerdict(resume: VerdictInput['resume']): Verdict {
  const target = `the first second after an idle spell: p99 ≤ ${String(TARGETS.resumeVersusSteady)}× the steady seconds'`;
  if (resume === undefined) return { target, figure: 'not measured in this run', pass: undefined };
  const ratio = resume.firstP99Ms / resume.steadyP99Ms;
  return {
    target,
    figure: `after ${String(resume.idleSeconds)} s idle: ${fmt(resume.firstP99Ms)} vs ${fmt(resume.steadyP99Ms)} ms (${fmt(ratio, 2)}×)`,
    pass: ratio <= TARGETS.resumeVersusSteady,
  };
}

/**
 * A `br` hit (the stored bytes as they are, docs/clients.md#content-coding): its body against the identity
 * body (at most 0.2× its bytes on the wire), with the whole answers, headers
 * included, beside it; and its CPU per hit, no higher than an identity hit's (judged over 50 pages,
 * where both are measured in the same interleaved rounds).
 */
function brVerdict(identity: TargetFigures, br: TargetFigures | undefined, bodies: VerdictInput['bodies']): Verdict {
  const target = `a br hit: body ≤ ${String(TARGETS.brBytesRatio)}× the identity body, CPU per hit no higher`;
  if (br === undefined || bodies === undefined) return { target, figure: 'not measured in this run', pass: undefined };
  const bodyRatio = bodies.br / bodies.identity;
  const answers = br.fiftyPages.bytesPerResponse / identity.fiftyPages.bytesPerResponse;
  const cpu = br.fiftyPages.usPerRequest / identity.fiftyPages.usPerRequest;
  return {
    target,
    figure:
      `body ${fmtInt(bodies.br)} vs ${fmtInt(bodies.identity)} B (${fmt(bodyRatio, 2)}×), ` +
      `with headers ${fmtInt(br.fiftyPages.bytesPerResponse)} vs ${fmtInt(identity.fiftyPages.bytesPerResponse)} B (${fmt(answers, 2)}×); ` +
      `${fmt(br.fiftyPages.usPerRequest, 1)} vs ${fmt(identity.fiftyPages.usPerRequest, 1)} µs CPU (${fmt(cpu, 2)}×)`,
    pass: bodyRatio <= TARGETS.brBytesRatio && cpu <= 1,
  };
}

/**
 * The proxy's p99 at half load against nginx's, judged only when the ruler can see a tail: the
 * anchors' own p99 within `halfLoadAnchorP99Ms` and the generator's schedule error within
 * `generatorErrorP99Ms`; otherwise the generator (or the machine) is the limit, and no verdict.
 */
function halfLoadVerdict(
  proxy: TargetFigures,
  nginx: TargetFigures | undefined,
  bare: TargetFigures | undefined,
): Verdict {
  const target = `p99 at half load ≤ ${String(TARGETS.halfLoadVersusNginx)}× nginx's (anchors ≤ ${String(TARGETS.halfLoadAnchorP99Ms)} ms, generator error ≤ ${String(TARGETS.generatorErrorP99Ms)} ms)`;
  if (nginx === undefined || bare === undefined) return { target, figure: 'no nginx in this run', pass: undefined };
  const error = Math.max(
    proxy.halfLoadGeneratorErrorP99Ms,
    nginx.halfLoadGeneratorErrorP99Ms,
    bare.halfLoadGeneratorErrorP99Ms,
  );
  const anchors = Math.max(nginx.halfLoadP99Ms, bare.halfLoadP99Ms);
  const figure =
    `${fmt(proxy.halfLoadP99Ms)} vs ${fmt(nginx.halfLoadP99Ms)} ms (${fmt(proxy.halfLoadP99Ms / nginx.halfLoadP99Ms, 1)}×); ` +
    `bare ${fmt(bare.halfLoadP99Ms)} ms; generator error p99 ${fmt(error, 3)} ms`;
  if (!(anchors <= TARGETS.halfLoadAnchorP99Ms) || !(error <= TARGETS.generatorErrorP99Ms))
    return { target, figure: `${figure}: the generator is the limit, no verdict`, pass: undefined };
  return { target, figure, pass: proxy.halfLoadP99Ms <= TARGETS.halfLoadVersusNginx * nginx.halfLoadP99Ms };
}

/**
 * What hot pages cost Redis with nothing changing: commands a second per hot page beyond the idle
 * rate, with the change channel (judged), and without its verdict (as before it, shown beside).
 */
export function redisLoadVerdict(load: RedisLoadFigures): Verdict {
  return {
    target: `Redis commands per hot page a second, nothing changing, ≤ ${String(TARGET_COMMANDS_PER_HOT_PAGE)}`,
    figure:
      `${fmt(load.told.perHotPagePerSecond, 2)} (without the channel's verdict ${fmt(load.asking.perHotPagePerSecond, 2)}); ` +
      `${fmt(load.told.fewPerSecond, 0)} and ${fmt(load.told.allPerSecond, 0)} commands/s over ${String(load.fewPages)} and ${String(load.pages)} pages, ${fmt(load.idlePerSecond, 0)} idle`,
    pass: load.told.perHotPagePerSecond <= TARGET_COMMANDS_PER_HOT_PAGE,
  };
}

/**
 * The proxy's p99 at full load against each anchor that ran (HAProxy and nginx): at most
 * `p99VersusAnchors` times the one and the other.
 */
function p99Verdict(input: VerdictInput, workload: 'fiftyPages' | 'onePage'): Verdict {
  const label = workload === 'fiftyPages' ? '50 pages' : 'one page';
  const target = `p99 at full load, ${label}, ≤ ${String(TARGETS.p99VersusAnchors)}× HAProxy's and nginx's`;
  const own = input.proxy[workload].p99Ms;
  const anchors = [
    { name: 'HAProxy', figures: input.haproxy },
    { name: 'nginx', figures: input.nginx },
  ].flatMap(({ name, figures }) => (figures === undefined ? [] : [{ name, p99Ms: figures[workload].p99Ms }]));
  if (anchors.length === 0) return { target, figure: `${fmt(own)} ms; no anchor in this run`, pass: undefined };
  return {
    target,
    figure: `${fmt(own)} ms; ${anchors.map((a) => `${a.name} ${fmt(a.p99Ms)} ms (${fmt(own / a.p99Ms, 1)}×)`).join(', ')}`,
    pass: anchors.every((a) => own <= TARGETS.p99VersusAnchors * a.p99Ms),
  };
}

/** Hits against the bare server, by req/s and by CPU, with HAProxy's ratio beside them when it ran. */
function hitVerdict(input: VerdictInput, workload: 'fiftyPages' | 'onePage'): Verdict {
  const ratioOf = (figures: TargetFigures): number =>
    workload === 'fiftyPages' ? figures.ratioFiftyPages : figures.ratioOnePage;
  const value = ratioOf(input.proxy);
  // The bare server's CPU per answer over this one's; shown as this one's over the bare's.
  const cpu = workload === 'fiftyPages' ? input.proxy.cpuRatioFiftyPages : input.proxy.cpuRatioOnePage;
  const peer = input.haproxy === undefined ? '' : ` (HAProxy ${fmt(ratioOf(input.haproxy), 2)}×)`;
  return {
    target:
      `hits ≥ ${String(TARGETS.hitRatio)}× bare, CPU per hit ≤ ${String(TARGETS.hitCpuVersusBare)}× bare's, ` +
      (workload === 'fiftyPages' ? `50 pages (${input.generator})` : 'one page'),
    figure: `${fmt(value, 2)}×${peer}; CPU per hit ${fmt(1 / cpu, 2)}× bare's (by CPU ${fmt(cpu, 2)}×)`,
    pass: value >= TARGETS.hitRatio && 1 / cpu <= TARGETS.hitCpuVersusBare,
  };
}

export function verdicts(input: VerdictInput): Verdict[] {
  const { proxy, nginx, upstream } = input;
  return [
    hitVerdict(input, 'fiftyPages'),
    hitVerdict(input, 'onePage'),
    p99Verdict(input, 'fiftyPages'),
    p99Verdict(input, 'onePage'),
    halfLoadVerdict(proxy, nginx, input.bare),
    brVerdict(proxy, input.proxyBr, input.bodies),
    {
      target: 'upstream requests during the hit rounds: the expiring pages’ refreshes alone',
      figure: `${String(upstream.requests)} (at most ${String(upstream.allowed)})`,
      pass: upstream.requests <= upstream.allowed,
    },
    {
      target: `${String(input.coalesced.requests)} cold requests over 2 replicas: 1 upstream request`,
      figure: String(input.coalesced.upstream),
      pass: input.coalesced.pass,
    },
    {
      target: `stored bytes ≤ ${String(input.stored.target)}× the raw JSON`,
      figure: `${fmt(input.stored.ratio, 3)}×`,
      pass: input.stored.pass,
    },
    {
      target: `a 429 in < ${fmtInt(input.rateLimited.target)} µs of proxy CPU, every answer a 429`,
      figure: `${fmt(input.rateLimited.usPerRequest, 1)} µs${input.rateLimited.other === 0 ? '' : `, ${String(input.rateLimited.other)} other answers`}`,
      pass: input.rateLimited.pass,
    },
    resumeVerdict(input.resume),
    ...allocationVerdicts(input.allocation),
  ];
}
