/**
 * `npm run bench:hits`: the hit rounds of `npm run bench` alone (docs/benchmarks.md#the-hit-path-alone),
 * on the same rig and with the same anchors — the bare `node:http` server, nginx's proxy_cache and
 * HAProxy doing the same job — and the verdicts that judge them: hits against the bare server, p99
 * against HAProxy's and nginx's, the upstream asked for the expiring pages' refreshes alone; then
 * the allocation phase (what a hit allocates, and the collector's pauses) and the Redis load phase
 * (Redis commands per hot page while nothing changes). What a change to the hit path costs, in a
 * few minutes instead of the whole bench's.
 *
 * Settings: those of `npm run bench` that concern the hit rounds (BENCH_ROUNDS, BENCH_SECONDS,
 * BENCH_CONNECTIONS, BENCH_WARMUP_SECONDS, BENCH_LEAD_SECONDS, BENCH_BEFORE, BENCH_REFRESHING, BENCH_L1_TTL,
 * BENCH_TARGETS, BENCH_HALF_LOAD, …), BENCH_ALLOCATION (0: no allocation phase) and
 * BENCH_REDIS_LOAD (0: no Redis load phase).
 */
import { envInt } from './lib/env.js';
import { fmt, say } from './lib/format.js';
import { runProgram } from './lib/processes.js';
import { allocationSettings, runAllocation } from './phases/allocation.js';
import { warmPages } from './phases/warm.js';
import { targetFigures } from './report/figures.js';
import { redisLoadVerdict, type Verdict, verdicts } from './report/verdicts.js';
import { BARE, HAPROXY, NGINX, PROXY, PROXY_BR, runHitRounds } from './run/hit-rounds.js';
import { runRedisLoadPhase } from './run/redis-load.js';
import { allocationInput, startAnchors, startRig } from './run/rig.js';
import { prepareBench, sayWhatRuns } from './run/settings.js';

/** The verdicts of the hit rounds: the first ones of the bench's list, up to the upstream's. */
const HIT_VERDICTS = 7;

async function hits(): Promise<number> {
  const setup = await prepareBench();
  sayWhatRuns(setup);
  const rig = await startRig(setup);
  const pages = await warmPages(rig.proxy1.url, rig.sandbox.url, rig.bearer);
  const anchors = await startAnchors(rig, pages, setup);
  const rounds = await runHitRounds(setup.ctx, rig, anchors, pages);
  if (envInt('BENCH_ALLOCATION', 1, 0, 1) === 1)
    await runAllocation(setup.ctx, allocationInput(rig, anchors, pages), allocationSettings());
  const redisLoad =
    envInt('BENCH_REDIS_LOAD', 1, 0, 1) === 1 ? await runRedisLoadPhase(setup.ctx, rig, pages) : undefined;
  const figuresOf = (name: string) => targetFigures(rounds.hits, rounds.half, name);
  const proxy = figuresOf(PROXY);
  if (proxy === undefined) throw new Error('no proxy figures');
  const list: Verdict[] = verdicts({
    proxy,
    proxyBr: figuresOf(PROXY_BR),
    nginx: figuresOf(NGINX),
    haproxy: figuresOf(HAPROXY),
    bare: figuresOf(BARE),
    upstream: { requests: rounds.upstreamDuringHits, allowed: rounds.refreshesAllowed },
    coalesced: { requests: 0, upstream: 0, pass: true },
    stored: { ratio: 0, target: 0, pass: true },
    rateLimited: { usPerRequest: 0, target: 0, other: 0, pass: true },
    generator: setup.ctx.generator.label,
  }).slice(0, HIT_VERDICTS);
  if (redisLoad !== undefined) list.push(redisLoadVerdict(redisLoad));
  say(`done in ${fmt((performance.now() - setup.started) / 1000, 0)} s`);
  for (const v of list) say(`  ${v.pass === undefined ? 'n/a ' : v.pass ? 'PASS' : 'MISS'}  ${v.target}: ${v.figure}`);
  return 0;
}

runProgram('bench:hits', hits);
