/**
 * `npm run profile`: where a cache hit's CPU or bytes go, in the real proxy under the bench's
 * load. A proxy as shipped (its V8 flags, its request log to /dev/null, inbound limits shared
 * through Redis and never refusing) on the server CPU, Redis and the sandbox on the other, the
 * bench's 50 warm pages, wrk for a warm-up and then for the measured seconds, during which V8's
 * own profiler runs in the proxy (bench/profile/preload.ts). Prints the functions and the places
 * (node, a package, the proxy's files) by µs of CPU or bytes allocated per answer, and keeps the
 * profile (open a `.cpuprofile` in Chrome's DevTools).
 *
 *   npm run profile -- [--kind cpu|heap|survivors|tail] [--target proxy|bare] [--seconds 10] [--top 25] [--out FILE] [--flags '--…']
 *                      [--rounds 1] [--idle 0]
 *
 * `--kind survivors`: the bytes that lived through a young-generation collection, by where they
 * were allocated (what the collector promotes, and what a scavenge copies).
 *
 * `--kind tail`: what ran while a reader waited (bench/profile/tail.ts): the event loop's slow
 * turns, the collections inside them and the CPU samples inside them, by function and by the
 * proxy's own frame; with `--rounds` loads of `--seconds` each after `--idle` seconds without one,
 * so that pages expire and refreshes run as when a load resumes.
 *
 * `--target bare`: the bare `node:http` server of the bench on the same pages, with the proxy's
 * shipped V8 flags: what Node itself costs an answer, for comparison.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { mintDevToken } from '../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { NEVER_REFUSING, writeBenchConfig } from './lib/bench-config.js';
import { fmt, fmtInt, say, textTable } from './lib/format.js';
import { closedLoopGenerator } from './lib/load/generators.js';
import {
  CLIENT_CPU,
  canPin,
  type Launched,
  pin,
  ROOT,
  runProgram,
  SERVER_CPU,
  scratchDir,
  stop,
} from './lib/processes.js';
import {
  requireBuild,
  shippedNodeFlags,
  startBaseline,
  startProxy,
  startRedisServer,
  startSandbox,
} from './lib/services.js';
import { requestsFor } from './phases/context.js';
import { warmPages } from './phases/warm.js';
import { type CpuProfile, cpuShares, type HeapProfile, heapShares, type Share } from './profile/summary.js';
import { type TailRecord, type TailReport, tailReport } from './profile/tail.js';

interface Options {
  readonly kind: 'cpu' | 'heap' | 'survivors' | 'tail';
  readonly target: 'proxy' | 'bare';
  readonly seconds: number;
  readonly top: number;
  readonly out: string | undefined;
  readonly flags: string[];
  readonly rounds: number;
  readonly idle: number;
}

function options(): Options {
  const { values } = parseArgs({
    options: {
      kind: { type: 'string', default: 'cpu' },
      target: { type: 'string', default: 'proxy' },
      seconds: { type: 'string', default: '10' },
      top: { type: 'string', default: '25' },
      out: { type: 'string' },
      flags: { type: 'string', default: '' },
      rounds: { type: 'string', default: '1' },
      idle: { type: 'string', default: '0' },
    },
    strict: true,
  });
  const kinds = ['cpu', 'heap', 'survivors', 'tail'] as const;
  const kind = kinds.find((k) => k === values.kind);
  if (kind === undefined) throw new Error('--kind is cpu, heap, survivors or tail');
  if (values.target !== 'proxy' && values.target !== 'bare') throw new Error('--target is proxy or bare');
  const seconds = Number(values.seconds);
  const top = Number(values.top);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 600) throw new Error('--seconds: 1 to 600');
  if (!Number.isInteger(top) || top < 1) throw new Error('--top: a whole number');
  const rounds = Number(values.rounds);
  const idle = Number(values.idle);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) throw new Error('--rounds: 1 to 20');
  if (!Number.isInteger(idle) || idle < 0 || idle > 600) throw new Error('--idle: 0 to 600');
  const flags = values.flags.split(' ').filter((f) => f !== '');
  return { kind, target: values.target, seconds, top, out: values.out, flags, rounds, idle };
}

function print(title: string, shares: readonly Share[], top: number, unit: string, digits: number): void {
  say(title);
  const rows = shares.slice(0, top).map((s) => [fmt(s.perAnswer, digits), `${fmt(100 * s.fraction, 1)}%`, s.what]);
  for (const line of textTable([`${unit} / answer`, 'share', 'where'], rows)) say(line);
  say();
}

function profileFile(kind: Options['kind'], out: string | undefined): string {
  if (out !== undefined) return out;
  return join(
    tmpdir(),
    kind === 'cpu' ? 'slab-proxy.cpuprofile' : `slab-proxy.${kind}.${kind === 'tail' ? 'json' : 'heapprofile'}`,
  );
}

async function profile(): Promise<number> {
  const { kind, target, seconds, top, out, flags, rounds, idle } = options();
  requireBuild();
  if (canPin()) pin(process.pid, CLIENT_CPU);
  const workDir = scratchDir('slab-profile-');
  const file = profileFile(kind, out);
  const secret = randomBytes(48).toString('base64url');
  const generator = await closedLoopGenerator();
  const redis = await startRedisServer(CLIENT_CPU);
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const profiler = [...flags, '--import', join(ROOT, 'dist-bench', 'bench', 'profile', 'preload.js')];
  const profilerEnv = { PROFILE_KIND: kind, PROFILE_OUT: file };
  const proxy = await startProxy({
    name: 'proxy',
    upstreamUrl: sandbox.url,
    redis,
    secret,
    logLevel: 'info',
    configFile: writeBenchConfig(workDir, 'profile.yaml', NEVER_REFUSING),
    cpu: SERVER_CPU,
    ...(target === 'proxy' && { nodeFlags: profiler, env: profilerEnv }),
  });
  const tokens = new Map<string, string>();
  for (const company of SANDBOX_COMPANIES.map(String)) tokens.set(company, await mintDevToken({ company, secret }));
  const bearer = (company: string): string => `Bearer ${tokens.get(company) ?? ''}`;
  const pages = await warmPages(proxy.url, sandbox.url, bearer);
  let server: { readonly url: string; readonly launched: Launched } = proxy;
  if (target === 'bare') {
    const pagesFile = join(workDir, 'pages.json');
    writeFileSync(pagesFile, JSON.stringify(Object.fromEntries(pages.map((p) => [p.path, p.body.toString('base64')]))));
    await stop(proxy.launched);
    server = await startBaseline('bare', pagesFile, SERVER_CPU, [...shippedNodeFlags(), ...profiler], profilerEnv);
  }
  const spec = (durationSec: number) => ({
    url: server.url,
    connections: 32,
    durationSec,
    requests: requestsFor(pages, bearer),
  });
  await generator.run(spec(3), workDir, 'warmup');
  server.launched.child.kill('SIGUSR2');
  const loads = [];
  for (let round = 1; round <= rounds; round++) {
    if (idle > 0) await delay(idle * 1000);
    loads.push(await generator.run(spec(seconds), workDir, `profiled-${String(round)}`));
  }
  server.launched.child.kill('SIGUSR2');
  for (let waited = 0; !server.launched.errors().includes('profile written'); waited += 100) {
    if (waited > 60_000) throw new Error(`no profile written; stderr: ${server.launched.errors().slice(-800)}`);
    await delay(100);
  }
  const answers = loads.reduce((sum, load) => sum + load.responses, 0);
  const what = target === 'bare' ? 'the bare server' : 'the proxy';
  say(
    `${kind} profile of ${what}, ${String(rounds)} × ${String(seconds)} s${idle > 0 ? ` after ${String(idle)} s idle each` : ''}: ` +
      `${fmtInt(answers)} answers, ${generator.label}; p99 by round ${loads.map((load) => fmt(load.p99Ms)).join(', ')} ms; kept in ${file}`,
  );
  say();
  const text = readFileSync(file, 'utf8');
  if (kind === 'tail') printTail(tailReport(JSON.parse(text) as TailRecord, top));
  else printShares(kind, text, answers, top);
  return 0;
}

function printShares(kind: Exclude<Options['kind'], 'tail'>, text: string, answers: number, top: number): void {
  const shares =
    kind === 'cpu'
      ? cpuShares(JSON.parse(text) as CpuProfile, answers)
      : heapShares(JSON.parse(text) as HeapProfile, answers);
  const [unit, digits] = kind === 'cpu' ? ['µs CPU', 2] : ['bytes', 0];
  const total = shares.byPlace.reduce((sum, share) => sum + share.perAnswer, 0);
  say(`in all: ${fmt(total, digits)} ${unit} per answer`);
  say();
  print('by place', shares.byPlace, top, unit, digits);
  print('by function', shares.byFunction, top, unit, digits);
}

function gcText(gcMs: Readonly<Record<string, number>>): string {
  const parts = Object.entries(gcMs).map(([kind, ms]) => `${kind} ${fmt(ms, 1)}`);
  return parts.length === 0 ? 'no collection' : `GC ms: ${parts.join(', ')}`;
}

function printTail(report: TailReport): void {
  const { slowTurns, inSlowTurns } = report;
  say(
    `slow turns of the event loop in ${fmt(report.seconds, 1)} s: ${fmtInt(slowTurns.over5)} of 5 ms or more, ` +
      `${fmtInt(slowTurns.over10)} of 10 ms or more (${fmt(inSlowTurns.ms, 0)} ms in all; ${gcText(inSlowTurns.gcMs)}), ${fmtInt(slowTurns.over20)} of 20 ms or more`,
  );
  say();
  say('the longest, each with what ran inside it');
  for (const stall of report.longest) {
    say(`  at ${fmt(stall.startMs / 1000, 3)} s: ${fmt(stall.lengthMs, 1)} ms; ${gcText(stall.gcMs)}`);
    say(`    own frames: ${stall.topOwnFrames.map((r) => `${r.what} ${fmt(r.ms, 1)}`).join('; ')}`);
    say(`    functions:  ${stall.topFunctions.map((r) => `${r.what} ${fmt(r.ms, 1)}`).join('; ')}`);
  }
  say();
  const rows = (ranked: readonly { what: string; ms: number }[]) =>
    ranked.map((r) => [fmt(r.ms, 1), `${fmt((100 * r.ms) / inSlowTurns.ms, 1)}%`, r.what]);
  say('inside every slow turn of 10 ms or more, by the proxy’s own frame nearest the top of the stack');
  for (const line of textTable(['ms', 'share', 'frame'], rows(report.ownFrames))) say(line);
  say();
  say('the same, by function (self time)');
  for (const line of textTable(['ms', 'share', 'function'], rows(report.functions))) say(line);
}

runProgram('profile', profile);
