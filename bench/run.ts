/**
 * `npm run bench`: what a cache hit costs, against the fastest answer Node gives on this machine
 * and against nginx's proxy_cache (docs/benchmarks.md).
 *
 * The rig (bench/run/rig.ts) starts, as separate processes, `redis-server`, the sandbox system of
 * record, two proxies (`node dist/main.js` as shipped: token verification, permission check, the
 * inbound limits shared through Redis but never refusing, one request log line per request to
 * /dev/null), the bare `node:http` server answering the same page bytes, and — where installed —
 * nginx caching the same pages from a local origin, and HAProxy doing the proxy's job on a hit by
 * configuration (bench/haproxy-cache.cfg) on the same origin. Then the phases of bench/phases/,
 * in this order:
 *
 *   warm.ts              50 pages of 30 records through proxy 1, checked to be hits with the upstream's bytes
 *   hits.ts              interleaved closed-loop rounds (wrk, else autocannon) per target, 50 pages and one page
 *   half-load.ts         every target paced at half the proxy's throughput (open loop)
 *   allocation.ts        bytes allocated per answer and the collector's pauses: a fresh bare server, a fresh proxy
 *   resume.ts            the first second after an idle spell, against the steady seconds after it
 *   rate-limited.ts      the 429 path: a third proxy refusing every request of one credential
 *   stored-bytes.ts      Redis bytes per stored page
 *   coalescing.ts        500 cold requests for one key over both proxies
 *   redis-load.ts        Redis commands per hot page while nothing changes, with the change channel and without
 *   noisy-neighbour.ts   one company's cold misses beside another's storm, on a small upstream budget
 *   freshness.ts         stale answers on the live sandbox: shipped TTLs, invalidations, automatic lifetimes
 *   advice-accuracy.ts   the freshness advice's stale share against what readers saw
 *   many-credentials.ts  250,000 distinct tokens on one cached page, in batches
 *   breakdown.ts         a hit's microseconds in process, step by step of the request flow
 *
 * and prints (bench/report.ts) the targets with their verdicts, the Markdown lines for
 * docs/benchmarks.md, and a `BENCH_RESULT {json}` line. Servers run on CPU 0, everything else on
 * CPU 1 (taskset). The exit code is non-zero only when something failed to run; a missed target is
 * a verdict.
 *
 * Settings: BENCH_ROUNDS (5), BENCH_SECONDS (3), BENCH_CONNECTIONS (32), BENCH_WARMUP_SECONDS (2),
 * BENCH_LEAD_SECONDS (1: unmeasured load before each hit round),
 * BENCH_GENERATOR (wrk | autocannon: force autocannon), BENCH_CPU_PROF (a directory: proxy 1
 * writes a V8 CPU profile there), BENCH_NODE_FLAGS (extra node flags for the proxies),
 * BENCH_L1_TTL (the proxies' `cache.l1.ttl`, seconds), BENCH_BEFORE (an earlier commit's checkout,
 * built, with its node_modules: its proxy joins the hit and half-load rounds as "proxy before", so
 * that a change is measured before and after in one run), BENCH_BEFORE_NODE (a node binary for that
 * proxy: the same build on another runtime, with BENCH_BEFORE=.), BENCH_LIMIT_WINDOW (the never-refusing
 * limits' window, seconds: 60, as shipped); the phases' own: bench/phases/*.ts.
 */
import { KEY_PREFIX } from './lib/bench-config.js';
import { say } from './lib/format.js';
import { runProgram, stop } from './lib/processes.js';
import { runAdviceAccuracy } from './phases/advice-accuracy.js';
import { allocationSettings, runAllocation } from './phases/allocation.js';
import { runBreakdown } from './phases/breakdown.js';
import { runCoalescing } from './phases/coalescing.js';
import { runFreshnessRuns } from './phases/freshness.js';
import { manyCredentialsSettings, runManyCredentials } from './phases/many-credentials.js';
import { runNoisyNeighbour } from './phases/noisy-neighbour.js';
import { runRateLimited } from './phases/rate-limited.js';
import { resumeSettings, runResume } from './phases/resume.js';
import { runStoredBytes } from './phases/stored-bytes.js';
import { brBodies, warmPages } from './phases/warm.js';
import { reportBench } from './report.js';
import { hitCosts, resumeTargets, runHitRounds } from './run/hit-rounds.js';
import { runRedisLoadPhase } from './run/redis-load.js';
import {
  allocationInput,
  rateLimitedInput,
  startAnchors,
  startNeighbourProxy,
  startRig,
  stopServers,
} from './run/rig.js';
import { prepareBench, sayWhatRuns } from './run/settings.js';

async function bench(): Promise<number> {
  const setup = await prepareBench();
  const { ctx } = setup;
  sayWhatRuns(setup);
  const rig = await startRig(setup);
  const { bearer, sandbox } = rig;
  const pages = await warmPages(rig.proxy1.url, sandbox.url, bearer);
  const bodies = await brBodies(rig.proxy1.url, pages, bearer);
  const anchors = await startAnchors(rig, pages, setup);

  const hitRounds = await runHitRounds(ctx, rig, anchors, pages);
  const allocation = await runAllocation(ctx, allocationInput(rig, anchors, pages), allocationSettings());
  say();
  const resume = await runResume(ctx, hitRounds.input, resumeTargets(hitRounds.input), resumeSettings());
  say();
  const rateLimited = await runRateLimited(ctx, rateLimitedInput(rig, anchors, pages));
  say();
  const stored = await runStoredBytes(rig.redis.url, KEY_PREFIX, pages);
  say();
  const coalesced = await runCoalescing([rig.proxy1.url, rig.proxy2.url], sandbox.url, bearer('1'));
  say();
  const redisLoad = await runRedisLoadPhase(ctx, rig, pages);
  say();
  const neighbourProxy = await startNeighbourProxy(rig);
  const neighbour = await runNoisyNeighbour(neighbourProxy.url, sandbox.url, bearer);
  await stop(neighbourProxy.launched);
  say();
  const freshness = await runFreshnessRuns(setup.nodeFlags);
  const advice = await runAdviceAccuracy(setup.nodeFlags);
  say();
  const crowd = await runManyCredentials(manyCredentialsSettings());
  say();

  // The breakdown runs in this process, with the servers stopped.
  await stopServers(rig, anchors);
  const breakdown = await runBreakdown({
    redisUrl: rig.redis.url,
    secret: rig.secret,
    pages,
    ...hitCosts(hitRounds.hits),
    pinned: ctx.pinned,
  });
  await stop(rig.redis.launched);

  reportBench({
    setup,
    bodies,
    ...hitRounds,
    allocation,
    resume,
    rateLimited,
    stored,
    coalesced,
    neighbour,
    freshness,
    advice,
    crowd,
    redisLoad,
    breakdown,
  });
  return 0;
}

runProgram('bench', bench);
