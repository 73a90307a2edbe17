/**
 * What `npm run bench` runs with: its settings from the environment, the closed-loop generator and
 * the nginx it finds on the machine, the CPUs it pins to, its scratch directory; and the lines that
 * open its output, saying so.
 */
import { cpus } from 'node:os';
import { envInt, envText } from '../lib/env.js';
import { say } from '../lib/format.js';
import { findHaproxy } from '../lib/haproxy.js';
import { closedLoopGenerator } from '../lib/load/generators.js';
import { findNginx } from '../lib/nginx.js';
import { CLIENT_CPU, canPin, pin, SERVER_CPU, scratchDir } from '../lib/processes.js';
import { requireBuild } from '../lib/services.js';
import type { BenchContext } from '../phases/context.js';

export type NginxFound = Awaited<ReturnType<typeof findNginx>>;
export type HaproxyFound = Awaited<ReturnType<typeof findHaproxy>>;

export interface BenchSetup {
  readonly ctx: BenchContext;
  readonly nginx: NginxFound;
  readonly haproxy: HaproxyFound;
  /** BENCH_NODE_FLAGS: node flags for every proxy, after the shipped ones. */
  readonly nodeFlags: readonly string[];
  /** BENCH_CPU_PROF: the directory where proxy 1 writes a V8 CPU profile. */
  readonly profileDir: string | undefined;
  /** `performance.now()` when the run started: its length in the report. */
  readonly started: number;
}

/** Reads the settings, checks the build, finds the generator, nginx and HAProxy, pins this process. */
export async function prepareBench(): Promise<BenchSetup> {
  const settings = {
    rounds: envInt('BENCH_ROUNDS', 5, 1, 40),
    seconds: envInt('BENCH_SECONDS', 3, 1, 120),
    connections: envInt('BENCH_CONNECTIONS', 32, 1, 1024),
    warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2, 0, 60),
    leadSeconds: envInt('BENCH_LEAD_SECONDS', 1, 0, 60),
  };
  const profileDir = envText('BENCH_CPU_PROF');
  const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');
  requireBuild();
  const started = performance.now();
  const generator = await closedLoopGenerator();
  const nginx = await findNginx();
  const haproxy = await findHaproxy();
  const pinned = canPin();
  // The orchestrator stays off the server CPU; children are pinned explicitly.
  if (pinned) pin(process.pid, CLIENT_CPU);
  const workDir = scratchDir('slab-bench-');
  return { ctx: { settings, generator, pinned, workDir }, nginx, haproxy, nodeFlags, profileDir, started };
}

/** The machine, the pinning, the load and the anchors this run measures with. */
export function sayWhatRuns({ ctx, nginx, haproxy }: BenchSetup): void {
  const { settings, generator, pinned } = ctx;
  say('slab-ops-proxy benchmark: cache hits against bare node:http, nginx proxy_cache and HAProxy doing the same job');
  say(`machine: ${String(cpus().length)} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}`);
  say(
    pinned
      ? `pinning: servers on CPU ${String(SERVER_CPU)} (bare, nginx, HAProxy, proxy 1, the 429 phase's proxy 3); load generator, redis, sandbox, proxy 2, the anchors' origin on CPU ${String(CLIENT_CPU)} (taskset)`
      : 'pinning: OFF (no taskset or one CPU): servers and load generator share the CPUs, figures are rough',
  );
  say(
    `load: ${generator.label}, ${String(settings.connections)} connections, ${String(settings.rounds)} interleaved rounds × ${String(settings.seconds)} s per target and workload, ${String(settings.warmupSeconds)} s warm-up each, ${String(settings.leadSeconds)} s unmeasured before each round`,
  );
  if (generator.note !== undefined) say(`  ${generator.note}`);
  say(
    'missing' in nginx
      ? `  ${nginx.missing}`
      : `anchor: nginx ${nginx.version} proxy_cache (bench/nginx-cache.conf), hits only`,
  );
  say(
    'missing' in haproxy
      ? `  ${haproxy.missing}`
      : `anchor: HAProxy ${haproxy.version} (bench/haproxy-cache.cfg): each token verified, permissions from its claims, a rate table and a cache per company, hits only`,
  );
  say();
}
