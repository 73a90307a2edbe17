/**
 * `npm run bench:ab`: this build's CPU per cache hit against another build's (BENCH_BEFORE, a
 * checkout built with its node_modules), over several starts of each. A proxy's CPU per hit moves
 * from one start of its process to the next by more than most changes cost
 * (docs/benchmarks.md#ab-over-several-starts), so one start per build cannot tell two builds apart;
 * the paired differences of several starts can.
 *
 * One `redis-server` and the sandbox on the client CPU. Each start: a fresh proxy of each build on
 * the server CPU (as `npm run bench` runs them: shipped flags, never-refusing limits shared through
 * Redis, the request log), every page read twice through each, BENCH_WARMUP_SECONDS of load on each,
 * then AB_ROUNDS interleaved closed-loop rounds of BENCH_SECONDS over the 50 pages; a start's
 * figure for a build is the median of its rounds. Which build starts and runs first alternates.
 *
 * Settings: AB_STARTS (5), AB_ROUNDS (3), BENCH_SECONDS, BENCH_CONNECTIONS, BENCH_WARMUP_SECONDS,
 * BENCH_NODE_FLAGS, BENCH_BEFORE (required), BENCH_BEFORE_NODE.
 */
import { randomBytes } from 'node:crypto';
import { mintDevToken } from '../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { NEVER_REFUSING, writeBenchConfig } from './lib/bench-config.js';
import { envInt, envText } from './lib/env.js';
import { fmt, say, spread, textTable } from './lib/format.js';
import type { LoadSpec } from './lib/load/types.js';
import { CLIENT_CPU, runProgram, SERVER_CPU, stop } from './lib/processes.js';
import { measureRound, type Round, rotation } from './lib/rounds.js';
import { type ProxyProcess, startProxy, startRedisServer, startSandbox } from './lib/services.js';
import { median } from './lib/stats.js';
import { type BenchContext, type Page, requestsFor } from './phases/context.js';
import { warmPages } from './phases/warm.js';
import { startBefore, warmProxy } from './run/rig.js';
import { prepareBench } from './run/settings.js';

const THIS_BUILD = 'this build';
const BEFORE = 'before';

/** What one start of both builds measured: each build's median CPU per hit and req/s. */
interface StartFigures {
  readonly usPerHit: Readonly<Record<string, number>>;
  readonly rps: Readonly<Record<string, number>>;
}

/** What every start shares: the sandbox, Redis, the secret, the configs, the tokens, the pages. */
interface AbRig {
  readonly ctx: BenchContext;
  readonly sandboxUrl: string;
  readonly start: Readonly<Record<string, () => Promise<ProxyProcess | undefined>>>;
  readonly bearer: (company: string) => string;
}

async function startAbRig(ctx: BenchContext, nodeFlags: readonly string[]): Promise<AbRig> {
  const secret = randomBytes(48).toString('base64url');
  const redis = await startRedisServer(CLIENT_CPU);
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxyOptions = { upstreamUrl: sandbox.url, redis, secret, logLevel: 'info' } as const;
  const configFile = writeBenchConfig(ctx.workDir, 'bench.yaml', NEVER_REFUSING);
  const tokens = new Map<string, string>();
  for (const company of SANDBOX_COMPANIES.map(String)) tokens.set(company, await mintDevToken({ company, secret }));
  return {
    ctx,
    sandboxUrl: sandbox.url,
    bearer: (company) => `Bearer ${tokens.get(company) ?? ''}`,
    start: {
      [THIS_BUILD]: () => startProxy({ ...proxyOptions, name: THIS_BUILD, configFile, cpu: SERVER_CPU, nodeFlags }),
      [BEFORE]: () => startBefore(ctx.workDir, proxyOptions, nodeFlags),
    },
  };
}

/** One start of both builds: fresh processes, warmed, measured in interleaved rounds, stopped. */
async function measureStart(rig: AbRig, pages: readonly Page[], index: number, rounds: number): Promise<StartFigures> {
  const { ctx, bearer } = rig;
  const { seconds, connections, warmupSeconds } = ctx.settings;
  const order = rotation([THIS_BUILD, BEFORE], index);
  const proxies = new Map<string, ProxyProcess>();
  for (const name of order) {
    const proxy = await rig.start[name]?.();
    if (proxy === undefined) throw new Error(`${name}: no proxy (is BENCH_BEFORE set?)`);
    proxies.set(name, proxy);
  }
  const spec = (url: string, durationSec: number): LoadSpec => ({
    url,
    connections,
    durationSec,
    requests: requestsFor(pages, bearer),
  });
  const run = (load: LoadSpec, label: string) => ctx.generator.run(load, ctx.workDir, label);
  const servers = new Map<string, Awaited<ReturnType<typeof warmProxy>>>();
  for (const [name, proxy] of proxies) {
    const server = await warmProxy(name, proxy, pages, bearer);
    if (warmupSeconds > 0) await run(spec(server.url, warmupSeconds), `warmup-${name}-${String(index)}`);
    servers.set(name, server);
  }
  const measured = new Map<string, Round[]>(order.map((name) => [name, []]));
  for (let round = 1; round <= rounds; round++)
    for (const name of rotation(order, round)) {
      const server = servers.get(name);
      if (server === undefined) continue;
      const r = await measureRound(server, spec(server.url, seconds), run, `${name}-${String(index)}-${String(round)}`);
      measured.get(name)?.push(r);
    }
  await Promise.all([...proxies.values()].map((proxy) => stop(proxy.launched)));
  const of = (pick: (r: Round) => number) =>
    Object.fromEntries([...measured].map(([name, rs]) => [name, median(rs.map(pick))]));
  return { usPerHit: of((r) => r.serverUsPerRequest), rps: of((r) => r.load.rps) };
}

function report(starts: readonly StartFigures[]): void {
  const us = (f: StartFigures, name: string): number => f.usPerHit[name] ?? Number.NaN;
  const differences = starts.map((f) => us(f, THIS_BUILD) - us(f, BEFORE));
  const signed = (n: number): string => `${n >= 0 ? '+' : ''}${fmt(n, 1)}`;
  say();
  const rows = starts.map((f, i) => [
    String(i + 1),
    fmt(us(f, THIS_BUILD), 1),
    fmt(us(f, BEFORE), 1),
    signed(differences[i] ?? Number.NaN),
    fmt(f.rps[THIS_BUILD] ?? Number.NaN, 0),
    fmt(f.rps[BEFORE] ?? Number.NaN, 0),
  ]);
  const header = [
    'start',
    'µs CPU/hit, this build',
    'µs CPU/hit, before',
    'difference',
    'req/s, this build',
    'req/s, before',
  ];
  for (const line of textTable(header, rows)) say(line);
  const mine = median(starts.map((f) => us(f, THIS_BUILD)));
  const theirs = median(starts.map((f) => us(f, BEFORE)));
  const paired = median(differences);
  say();
  say(
    `CPU per hit over ${String(starts.length)} starts: this build ${fmt(mine, 1)} µs, before ${fmt(theirs, 1)} µs ` +
      `(${fmt(mine / theirs, 2)}×); paired difference median ${signed(paired)} µs, ` +
      `range ${spread(differences, 1)} µs`,
  );
  say(`AB_RESULT ${JSON.stringify({ starts, thisBuildUs: mine, beforeUs: theirs, pairedDifferenceUs: paired })}`);
}

async function ab(): Promise<number> {
  if (envText('BENCH_BEFORE') === undefined) throw new Error('BENCH_BEFORE: the checkout to compare with is required');
  const { ctx, nodeFlags } = await prepareBench();
  const starts = envInt('AB_STARTS', 5, 1, 40);
  const rounds = envInt('AB_ROUNDS', 3, 1, 40);
  say(
    `A/B of CPU per cache hit: this build against ${envText('BENCH_BEFORE') ?? ''}, ${String(starts)} starts × ${String(rounds)} rounds × ${String(ctx.settings.seconds)} s, ${ctx.generator.label}, ${String(ctx.settings.connections)} connections`,
  );
  const rig = await startAbRig(ctx, nodeFlags);
  const first = await rig.start[THIS_BUILD]?.();
  if (first === undefined) throw new Error('this build: no proxy');
  const pages = await warmPages(first.url, rig.sandboxUrl, rig.bearer);
  await stop(first.launched);
  const figures: StartFigures[] = [];
  for (let index = 1; index <= starts; index++) {
    const start = await measureStart(rig, pages, index, rounds);
    figures.push(start);
    say(
      `start ${String(index)}: this build ${fmt(start.usPerHit[THIS_BUILD] ?? Number.NaN, 1)} µs/hit, before ${fmt(start.usPerHit[BEFORE] ?? Number.NaN, 1)} µs/hit`,
    );
  }
  report(figures);
  return 0;
}

runProgram('bench:ab', ab);
