/**
 * `npm run bench`: what a cache hit costs, against the fastest answer Node gives on this machine
 * and against nginx's proxy_cache (docs/benchmarks.md).
 *
 * It starts, as separate processes, `redis-server`, the sandbox system of record, two proxies
 * (`node dist/main.js` as shipped: token verification, permission check, the inbound limits
 * shared through Redis but never refusing, one request log line per request to /dev/null), the
 * bare `node:http` server answering the same page bytes, and — with `nginx` installed — nginx
 * caching the same pages from a local origin. Then, in phases (bench/phases/):
 *
 *   warm         50 pages of 30 records through proxy 1, checked to be hits with the upstream's bytes
 *   hits         interleaved closed-loop rounds (wrk, else autocannon) per target, 50 pages and one page
 *   half load    every target paced at half the proxy's throughput (open loop)
 *   429          a third proxy refusing every request of one credential
 *   stored bytes Redis bytes per stored page
 *   coalescing   500 cold requests for one key over both proxies
 *   many credentials  250,000 distinct tokens on one cached page, in batches (bench/phases/many-credentials.ts)
 *   breakdown    a hit's microseconds in process, step by step of the request flow (bench/hit-breakdown.ts)
 *
 * and prints the targets with their verdicts, the Markdown lines for docs/benchmarks.md, and a
 * `BENCH_RESULT {json}` line. Servers run on CPU 0, everything else on CPU 1 (taskset). The exit
 * code is non-zero only when something failed to run; a missed target is a verdict.
 *
 * Settings: BENCH_ROUNDS (5), BENCH_SECONDS (3), BENCH_CONNECTIONS (32), BENCH_WARMUP_SECONDS (2),
 * BENCH_GENERATOR (wrk | autocannon: force autocannon), BENCH_CPU_PROF (a directory: proxy 1
 * writes a V8 CPU profile there), BENCH_NODE_FLAGS (extra node flags for the proxies),
 * BENCH_L1_TTL (the proxies' `cache.l1.ttl`, seconds), BENCH_BEFORE (an earlier commit's checkout,
 * built, with its node_modules: its proxy joins the hit and half-load rounds as "proxy before", so
 * that a change is measured before and after in one run), BENCH_BEFORE_NODE (a node binary for that
 * proxy: the same build on another runtime, with BENCH_BEFORE=.), BENCH_LIMIT_WINDOW (the never-refusing
 * limits' window, seconds: 60, as shipped).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { mintDevToken } from '../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { breakdownResult } from './hit-breakdown.js';
import { KEY_PREFIX, NEVER_REFUSING, writeBenchConfig } from './lib/bench-config.js';
import { envInt, envText } from './lib/env.js';
import { BENCHMARKS_DOC, docsBlock, fmt, fmtInt, runStamp, say } from './lib/format.js';
import { sandboxStats } from './lib/http.js';
import { closedLoopGenerator } from './lib/load/generators.js';
import { findNginx, startNginxCache, warmNginx } from './lib/nginx.js';
import { CLIENT_CPU, canPin, pin, runProgram, SERVER_CPU, scratchDir, stop } from './lib/processes.js';
import type { MeasuredServer } from './lib/rounds.js';
import {
  baselineServed,
  expectBytes,
  type ProxyProcess,
  requireBuild,
  shippedNodeFlags,
  startBaseline,
  startProxy,
  startRedisServer,
  startSandbox,
} from './lib/services.js';
import { tailProbe } from './lib/tail-probe.js';
import { runAllocation } from './phases/allocation.js';
import { runBreakdown } from './phases/breakdown.js';
import { runCoalescing } from './phases/coalescing.js';
import type { BenchContext, Page } from './phases/context.js';
import {
  AUTO_P99_RATIO,
  AUTO_STALE_RATIO,
  type FreshnessFigures,
  freshnessSettings,
  INVALIDATED_P99_MS,
  INVALIDATED_STALE_SHARE,
  runFreshness,
} from './phases/freshness.js';
import { runHalfLoad } from './phases/half-load.js';
import { type HitTarget, runHitPhase, type ServerName } from './phases/hits.js';
import {
  manyCredentialsSettings,
  runManyCredentials,
  TARGET_BATCH_RATIO,
  TARGET_RSS_MB,
} from './phases/many-credentials.js';
import { NEIGHBOUR_BUDGET, runNoisyNeighbour } from './phases/noisy-neighbour.js';
import { ONE_POINT, runRateLimited, TARGET_US_PER_429 } from './phases/rate-limited.js';
import { runResume } from './phases/resume.js';
import { runStoredBytes, TARGET_STORED_RATIO } from './phases/stored-bytes.js';
import { brBodies, warmPages } from './phases/warm.js';
import { BUSY_SERVER_CPU_PCT, benchMarkdown, type TargetFigures, type Verdict, verdicts } from './report.js';

/**
 * What the hit rounds measure, one line per target: a server and the headers its requests carry
 * beyond each page's Authorization. A target whose server is not running (no nginx) is skipped.
 */
const HIT_TARGETS: readonly HitTarget[] = [
  { name: 'bare node:http', server: 'bare' },
  { name: 'nginx proxy_cache', server: 'nginx' },
  { name: 'proxy cache hits', server: 'proxy' },
  { name: 'proxy br hits', server: 'proxy', headers: { 'accept-encoding': 'br' } },
  { name: 'proxy before', server: 'before' },
];
const BARE = 'bare node:http';
const PROXY = 'proxy cache hits';
const PROXY_BR = 'proxy br hits';
const NGINX = 'nginx proxy_cache';

/**
 * The proxy of another build (BENCH_BEFORE), on the server CPU beside this one, with its own key
 * prefix (an earlier entry format must not meet this one's) and the same limits.
 */
async function startBefore(
  workDir: string,
  proxyOptions: Omit<Parameters<typeof startProxy>[0], 'name' | 'configFile'>,
  nodeFlags: readonly string[],
  name = 'proxy before',
): Promise<ProxyProcess | undefined> {
  const dir = envText('BENCH_BEFORE');
  if (dir === undefined) return undefined;
  const mainJs = join(resolve(dir), 'dist', 'main.js');
  if (!existsSync(mainJs)) throw new Error(`BENCH_BEFORE: ${mainJs} is missing (build that checkout first)`);
  const node = envText('BENCH_BEFORE_NODE');
  if (node !== undefined && !existsSync(node)) throw new Error(`BENCH_BEFORE_NODE: ${node} is missing`);
  say(
    `before: the proxy of ${dir}${node === undefined ? '' : ` on ${node}`}, as "proxy before", with the key prefix ${KEY_PREFIX}-before`,
  );
  return startProxy({
    ...proxyOptions,
    name,
    configFile: writeBenchConfig(workDir, 'bench-before.yaml', NEVER_REFUSING, `${KEY_PREFIX}-before`),
    cpu: SERVER_CPU,
    nodeFlags,
    mainJs,
    ...(node !== undefined && { node }),
  });
}

/** Every page through the earlier build twice (a fill, then a hit), before the upstream is counted. */
async function warmBefore(
  before: ProxyProcess,
  pages: readonly Page[],
  bearer: (company: string) => string,
): Promise<MeasuredServer> {
  for (let pass = 0; pass < 2; pass++)
    for (const page of pages) {
      const res = await fetch(`${before.url}${page.path}`, { headers: { authorization: bearer(page.company) } });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200 || !body.equals(page.body))
        throw new Error(`proxy before: ${page.path} answered ${String(res.status)} with other bytes`);
    }
  return { url: before.url, pids: () => [before.launched.pid], probe: tailProbe(`${before.adminUrl}/metrics`) };
}

async function bench(): Promise<number> {
  const settings = {
    rounds: envInt('BENCH_ROUNDS', 5, 1, 40),
    seconds: envInt('BENCH_SECONDS', 3, 1, 120),
    connections: envInt('BENCH_CONNECTIONS', 32, 1, 1024),
    warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2, 0, 60),
  };
  const profileDir = envText('BENCH_CPU_PROF');
  const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');
  requireBuild();
  const started = performance.now();
  const generator = await closedLoopGenerator();
  const nginx = await findNginx();
  const pinned = canPin();
  // The orchestrator stays off the server CPU; children are pinned explicitly.
  if (pinned) pin(process.pid, CLIENT_CPU);
  const workDir = scratchDir('slab-bench-');
  const ctx: BenchContext = { settings, generator, pinned, workDir };
  const secret = randomBytes(48).toString('base64url');

  say('slab-ops-proxy benchmark: cache hits against bare node:http and nginx proxy_cache');
  say(`machine: ${String(cpus().length)} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}`);
  say(
    pinned
      ? `pinning: servers on CPU ${String(SERVER_CPU)} (bare, nginx, proxy 1, the 429 phase's proxy 3); load generator, redis, sandbox, proxy 2, nginx's origin on CPU ${String(CLIENT_CPU)} (taskset)`
      : 'pinning: OFF (no taskset or one CPU): servers and load generator share the CPUs, figures are rough',
  );
  say(
    `load: ${generator.label}, ${String(settings.connections)} connections, ${String(settings.rounds)} interleaved rounds × ${String(settings.seconds)} s per target and workload, ${String(settings.warmupSeconds)} s warm-up each`,
  );
  if (generator.note !== undefined) say(`  ${generator.note}`);
  say(
    'missing' in nginx
      ? `  ${nginx.missing}`
      : `anchor: nginx ${nginx.version} proxy_cache (bench/nginx-cache.conf), hits only`,
  );
  say();

  const redis = await startRedisServer(CLIENT_CPU);
  const redisUrl = redis.url;
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const configFile = writeBenchConfig(workDir, 'bench.yaml', NEVER_REFUSING);
  const proxyOptions = { upstreamUrl: sandbox.url, redis, secret, logLevel: 'info' } as const;
  const proxy1 = await startProxy({
    ...proxyOptions,
    name: 'proxy 1',
    configFile,
    cpu: SERVER_CPU,
    nodeFlags: [...nodeFlags, ...(profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`])],
  });
  const proxy2 = await startProxy({ ...proxyOptions, name: 'proxy 2', configFile, cpu: CLIENT_CPU, nodeFlags });
  const before = await startBefore(workDir, proxyOptions, nodeFlags);

  const tokens = new Map<string, string>();
  for (const company of SANDBOX_COMPANIES.map(String)) tokens.set(company, await mintDevToken({ company, secret }));
  const bearer = (company: string): string => `Bearer ${tokens.get(company) ?? ''}`;

  const pages: Page[] = await warmPages(proxy1.url, sandbox.url, bearer);
  const bodies = await brBodies(proxy1.url, pages, bearer);
  const pagesFile = join(workDir, 'pages.json');
  writeFileSync(pagesFile, JSON.stringify(Object.fromEntries(pages.map((p) => [p.path, p.body.toString('base64')]))));
  const firstPage = pages[0];
  if (firstPage === undefined) throw new Error('no pages');
  const bare = await startBaseline('bare node:http', pagesFile, SERVER_CPU);
  const bareServer: MeasuredServer = { url: bare.url, pids: () => [bare.launched.pid] };
  await expectBytes('the bare server', `${bare.url}${firstPage.path}`, firstPage.body);

  let nginxServer: MeasuredServer | undefined;
  let origin: { url: string } | undefined;
  if (!('missing' in nginx)) {
    origin = await startBaseline('nginx origin', pagesFile, CLIENT_CPU);
    const cache = await startNginxCache(nginx.path, {
      dir: join(workDir, 'nginx'),
      originUrl: origin.url,
      cpu: SERVER_CPU,
    });
    await warmNginx(
      cache.url,
      pages.map((p) => p.path),
    );
    await expectBytes('nginx', `${cache.url}${firstPage.path}`, firstPage.body);
    nginxServer = { url: cache.url, pids: cache.workerPids };
  }
  const servers: Record<ServerName, MeasuredServer | undefined> = {
    bare: bareServer,
    nginx: nginxServer,
    proxy: { url: proxy1.url, pids: () => [proxy1.launched.pid], probe: tailProbe(`${proxy1.adminUrl}/metrics`) },
    before: before === undefined ? undefined : await warmBefore(before, pages, bearer),
  };
  const targets = HIT_TARGETS.filter((t) => servers[t.server] !== undefined);
  const input = { targets, servers, pages, bearer, bare: BARE };

  // ── hits, then half load: the upstream must not be asked for anything meanwhile ──
  const servedBefore = (await sandboxStats(sandbox.url)).served;
  const originBefore = origin === undefined ? 0 : await baselineServed(origin.url);
  say(`hit phase (inbound limits on, shared through Redis, never refusing: every hit pays the shared limit decision)`);
  const hits = await runHitPhase(ctx, input);
  say();
  const proxyHits = hits.get(PROXY)?.['50 pages'].summary;
  if (proxyHits === undefined) throw new Error('no proxy figures');
  const half = await runHalfLoad(ctx, input, Math.max(1, Math.round(proxyHits.rps / 2)));
  const upstreamDuringHits = (await sandboxStats(sandbox.url)).served - servedBefore;
  const originDuringHits = origin === undefined ? 0 : (await baselineServed(origin.url)) - originBefore;
  say();
  say(
    `upstream requests during the hit and half-load rounds: ${String(upstreamDuringHits)} (target 0)${origin === undefined ? '' : `; nginx's origin: ${String(originDuringHits)} (nginx served hits only)`}`,
  );
  say();

  // ── what a hit allocates, and the first second after an idle spell ──
  const allocation = await runAllocation(
    ctx,
    {
      pages,
      bearer,
      startBare: async (flags) => {
        const server = await startBaseline('bare (allocation)', pagesFile, SERVER_CPU, [
          ...shippedNodeFlags(),
          ...flags,
        ]);
        return server;
      },
      startProxy: async (flags) => {
        const server = await startProxy({
          ...proxyOptions,
          name: 'proxy (allocation)',
          configFile,
          cpu: SERVER_CPU,
          nodeFlags: [...nodeFlags, ...flags],
          stdout: 'pipe',
        });
        return { url: server.url, launched: server.launched };
      },
      startBefore:
        before === undefined
          ? undefined
          : async (flags) => {
              const server = await startBefore(
                workDir,
                { ...proxyOptions, stdout: 'pipe' },
                [...nodeFlags, ...flags],
                'proxy before (allocation)',
              );
              if (server === undefined) throw new Error('BENCH_BEFORE: no proxy');
              return { url: server.url, launched: server.launched };
            },
    },
    {
      warmupSeconds: 3,
      bareSeconds: envInt('BENCH_ALLOCATION_BARE_SECONDS', 15, 1, 600),
      proxySeconds: envInt('BENCH_ALLOCATION_SECONDS', 60, 1, 600),
    },
  );
  say();
  const resume = await runResume(
    ctx,
    input,
    targets.filter((t) => t.server !== 'before' && t.headers === undefined),
    { idleSeconds: envInt('BENCH_RESUME_IDLE', 10, 1, 600), steadySeconds: 3, rounds: 3 },
  );
  say();

  // ── the 429 path ──
  const rateLimited = await runRateLimited(ctx, {
    redisUrl,
    secret,
    pages,
    bare: bareServer,
    startLimitedProxy: () =>
      startProxy({
        ...proxyOptions,
        name: 'proxy 3 (429)',
        configFile: writeBenchConfig(workDir, 'bench-429.yaml', ONE_POINT),
        cpu: SERVER_CPU,
        nodeFlags,
      }),
  });
  say();
  const stored = await runStoredBytes(redisUrl, KEY_PREFIX, pages);
  say();
  const coalesced = await runCoalescing([proxy1.url, proxy2.url], sandbox.url, bearer('1'));
  say();
  const neighbourProxy = await startProxy({
    ...proxyOptions,
    name: 'proxy 4 (noisy neighbour)',
    configFile: writeBenchConfig(
      workDir,
      'bench-neighbour.yaml',
      NEVER_REFUSING,
      `${KEY_PREFIX}-neighbour`,
      NEIGHBOUR_BUDGET,
    ),
    cpu: SERVER_CPU,
    nodeFlags,
  });
  const neighbour = await runNoisyNeighbour(neighbourProxy.url, sandbox.url, bearer);
  await stop(neighbourProxy.launched);
  say();
  const freshness = await runFreshness(freshnessSettings(), nodeFlags, 'fixed');
  say();
  const invalidated = await runFreshness(freshnessSettings(), nodeFlags, 'invalidated');
  say();
  const pagesFixed = await runFreshness(freshnessSettings(), nodeFlags, 'fixed', 'pages');
  say();
  const pagesAuto = await runFreshness(freshnessSettings(), nodeFlags, 'auto', 'pages');
  say();
  const crowd = await runManyCredentials(manyCredentialsSettings());
  say();

  // ── the breakdown, in this process, with the servers stopped ──
  await Promise.all(
    [
      proxy1.launched,
      proxy2.launched,
      sandbox.launched,
      bare.launched,
      ...(before === undefined ? [] : [before.launched]),
    ].map((p) => stop(p)),
  );
  const bareHits = hits.get(BARE)?.['50 pages'].summary;
  const breakdown = await runBreakdown({
    redisUrl,
    secret,
    pages,
    hitsPerSecond: proxyHits.rps,
    proxyUsPerRequest: proxyHits.usPerRequest,
    bareUsPerRequest: bareHits?.usPerRequest ?? Number.NaN,
    pinned,
  });
  await stop(redis.launched);

  // ── targets and the lines for docs/benchmarks.md ──
  const figuresOf = (name: string): TargetFigures | undefined => {
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
  };
  const rows = targets.map((t) => figuresOf(t.name)).filter((row): row is TargetFigures => row !== undefined);
  const proxyRow = figuresOf(PROXY);
  if (proxyRow === undefined) throw new Error('no proxy figures');
  const proxyResume = resume.byTarget.get(PROXY);
  const list = verdicts({
    proxy: proxyRow,
    proxyBr: figuresOf(PROXY_BR),
    bodies,
    nginx: figuresOf(NGINX),
    bare: figuresOf(BARE),
    upstreamDuringHits,
    coalesced,
    stored: { ratio: stored.storedRatio, target: TARGET_STORED_RATIO, pass: stored.pass },
    rateLimited: {
      usPerRequest: rateLimited.refused.usPerRequest,
      target: TARGET_US_PER_429,
      other: rateLimited.other,
      pass: rateLimited.pass,
    },
    generator: generator.label,
    allocation,
    resume: proxyResume && { idleSeconds: resume.idleSeconds, ...proxyResume },
  });
  list.push({
    target: "noisy neighbour: B's cold misses beside A's storm: 0 refused, p99 ≤ 2× alone",
    figure: `${String(neighbour.beside.refused)} refused, p99 ${fmt(neighbour.beside.p99Ms, 0)} vs ${fmt(neighbour.alone.p99Ms, 0)} ms (${fmt(neighbour.beside.p99Ms / neighbour.alone.p99Ms)}×)`,
    pass: neighbour.pass,
  });
  list.push({
    target: 'freshness on the live sandbox, the shipped TTLs (measured, the yardstick for other lifetimes)',
    figure: `${fmt(freshness.staleShare * 100, 1)}% stale, staleness p99 ${fmt(freshness.p99Ms / 1000, 1)} s, ${fmtInt(freshness.upstreamPerMinute)} upstream requests/min`,
    pass: undefined,
  });
  list.push({
    target: `freshness with every change sent to the proxy: ≤ ${fmt(INVALIDATED_STALE_SHARE * 100, 0)}% stale, staleness p99 ≤ ${fmt(INVALIDATED_P99_MS / 1000, 0)} s, upstream ≤ the changes' pages + cold misses`,
    figure: `${fmt(invalidated.staleShare * 100, 1)}% stale, staleness p99 ${fmt(invalidated.p99Ms / 1000, 1)} s, ${fmtInt(invalidated.upstreamPerMinute)} upstream requests/min (${fmtInt(invalidated.notModifiedPerMinute)} 304s)`,
    pass:
      invalidated.staleShare <= INVALIDATED_STALE_SHARE &&
      invalidated.p99Ms <= INVALIDATED_P99_MS &&
      invalidated.upstreamPerMinute <=
        invalidated.pageChangesPerMinute + (invalidated.pages * 60) / freshnessSettings().seconds,
  });
  list.push(autoVerdict(pagesFixed, pagesAuto));
  list.push({
    target: `many credentials: no batch over ${String(TARGET_BATCH_RATIO)}× the median, RSS < ${String(TARGET_RSS_MB)} MB`,
    figure: `${crowd.slowestRatio.toFixed(2)}×, ${Math.round(crowd.rssMb)} MB`,
    pass: crowd.pass,
  });
  const stampDetails = [
    generator.label,
    'missing' in nginx ? 'no nginx' : `nginx ${nginx.version}`,
    `${String(settings.connections)} connections`,
    `${String(settings.rounds)} rounds × ${String(settings.seconds)} s`,
  ];
  const elapsed = (performance.now() - started) / 1000;
  const missed = list.filter((v) => v.pass === false).map((v) => v.target);
  say();
  say(`done in ${fmt(elapsed, 0)} s; ${missed.length === 0 ? 'every target met' : `missed: ${missed.join('; ')}`}`);
  say();
  const hitRounds = [...hits.values()].flatMap((byWorkload) => [
    ...byWorkload['50 pages'].rounds,
    ...byWorkload['one page'].rounds,
  ]);
  const disturbance = {
    busyRounds: hitRounds.filter((r) => !(r.serverCpuPct >= BUSY_SERVER_CPU_PCT)).length,
    rounds: hitRounds.length,
  };
  for (const line of docsBlock(
    BENCHMARKS_DOC,
    benchMarkdown(runStamp('npm run bench', stampDetails), rows, list, disturbance),
  ))
    say(line);
  say();
  say(
    `BENCH_RESULT ${JSON.stringify({
      generator: generator.label,
      nginx: 'missing' in nginx ? null : nginx.version,
      targets: rows.map((row) => ({
        name: row.name,
        rps_50: Math.round(row.fiftyPages.rps),
        ratio_50: round(row.ratioFiftyPages, 3),
        us_cpu_50: round(row.fiftyPages.usPerRequest, 2),
        p50_ms_50: row.fiftyPages.p50Ms,
        p99_ms_50: row.fiftyPages.p99Ms,
        rps_1: Math.round(row.onePage.rps),
        ratio_1: round(row.ratioOnePage, 3),
        cpu_ratio_50: round(row.cpuRatioFiftyPages, 3),
        cpu_ratio_1: round(row.cpuRatioOnePage, 3),
        us_cpu_1: round(row.onePage.usPerRequest, 2),
        p50_ms_1: row.onePage.p50Ms,
        p99_ms_1: row.onePage.p99Ms,
        p99_ms_half: row.halfLoadP99Ms,
        bytes_per_answer: Math.round(row.fiftyPages.bytesPerResponse),
      })),
      busy_rounds: disturbance.busyRounds,
      hit_rounds: disturbance.rounds,
      half_load_rate: half.rate,
      allocation: {
        bare_bytes_per_answer: Math.round(allocation.bare.bytesPerAnswer),
        proxy_bytes_per_answer: Math.round(allocation.proxy.bytesPerAnswer),
        proxy_promoted_per_answer: round(allocation.proxy.promotedPerAnswer, 1),
        proxy_longest_young_ms: allocation.proxy.longestScavengeMs,
        proxy_full_collections: allocation.proxy.fullCollections,
      },
      resume: Object.fromEntries(
        [...resume.byTarget].map(([name, f]) => [name, { first_p99_ms: f.firstP99Ms, steady_p99_ms: f.steadyP99Ms }]),
      ),
      upstream_during_hits: upstreamDuringHits,
      nginx_origin_during_hits: originDuringHits,
      rate_limited: {
        rps: Math.round(rateLimited.refused.rps),
        us_cpu_per_req: round(rateLimited.refused.usPerRequest, 2),
        p99_ms: rateLimited.refused.p99Ms,
        answers_429: rateLimited.answers429,
        other: rateLimited.other,
        redis_commands: rateLimited.redisCommands,
        redis_commands_background: rateLimited.redisCommandsBackground,
      },
      many_credentials: {
        tokens: crowd.settings.tokens,
        batch: crowd.settings.batch,
        median_s: round(crowd.medianSeconds, 2),
        slowest_ratio: round(crowd.slowestRatio, 2),
        rss_mb: Math.round(crowd.rssMb),
      },
      coalescing: { requests: coalesced.requests, upstream: coalesced.upstream, statuses: coalesced.statuses },
      redis: {
        stored_ratio: round(stored.storedRatio, 3),
        value_ratio: round(stored.valueRatio, 3),
        raw_bytes: Math.round(stored.rawBytes),
      },
      breakdown_us: Object.fromEntries(
        Object.entries(breakdownResult(breakdown)).map(([name, us]) => [name, round(us, 2)]),
      ),
      pass: Object.fromEntries(list.map((v) => [v.target, v.pass ?? null])),
      seconds: Math.round(elapsed),
    })}`,
  );
  say(
    `(${fmtInt(rows.length)} targets measured; figures from a shared machine are indicative: read CPU per request first)`,
  );
  return 0;
}

function round(n: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(n * scale) / scale;
}

runProgram('bench', bench);

/**
 * Automatic lifetimes against the shipped TTLs on the `pages` workload: at most half the stale
 * answers for no more upstream requests, or as few for at most half the requests; and a staleness
 * p99 at most half the fixed TTLs'.
 */
function autoVerdict(fixed: FreshnessFigures, auto: FreshnessFigures): Verdict {
  const stale = auto.staleShare / fixed.staleShare;
  const requests = auto.upstreamPerMinute / fixed.upstreamPerMinute;
  const p99 = auto.p99Ms / fixed.p99Ms;
  const trade = (stale <= AUTO_STALE_RATIO && requests <= 1) || (stale <= 1 && requests <= AUTO_STALE_RATIO);
  return {
    target: `automatic lifetimes (pages workload): stale ≤ ${fmt(AUTO_STALE_RATIO)}× fixed at ≤ its requests, or ≤ its stale at ≤ ${fmt(AUTO_STALE_RATIO)}× the requests; p99 ≤ ${fmt(AUTO_P99_RATIO)}×`,
    figure: `${fmt(auto.staleShare * 100, 1)}% vs ${fmt(fixed.staleShare * 100, 1)}% stale (${fmt(stale)}×), p99 ${fmt(auto.p99Ms / 1000, 1)} vs ${fmt(fixed.p99Ms / 1000, 1)} s (${fmt(p99)}×), ${fmtInt(auto.upstreamPerMinute)} vs ${fmtInt(fixed.upstreamPerMinute)} upstream requests/min (${fmt(requests)}×)`,
    pass: trade && p99 <= AUTO_P99_RATIO,
  };
}
