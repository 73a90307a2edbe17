/**
 * `npm run bench`: what a cache hit costs, against the fastest answer Node gives on this machine.
 *
 * It starts, as separate processes, `redis-server`, the sandbox system of record, two proxies
 * (`node dist/main.js`, as shipped: token verification, permission check and one request log line
 * per request at LOG_LEVEL=info, stdout to /dev/null) and a bare `node:http` baseline that serves
 * the same page bytes. The proxies run with the inbound limits on, shared through Redis, and never
 * refusing (10,000,000 points per second per credential and per company): every hit pays the
 * shared limit decision. Then:
 *
 *   1. warms 50 distinct pages of 30 records through proxy 1 (keyset walks over every company's
 *      resources), checks that the proxy's bytes are the upstream's, and gives them to the baseline;
 *   2. interleaves rounds of autocannon (its own process, pinned to CPU 1; the server to CPU 0)
 *      against the baseline and the proxy's cache hits, and reports medians: req/s, p50/p99,
 *      server CPU per request, client CPU; the upstream requests seen meanwhile must be 0;
 *   3. runs both at half the proxy's measured throughput, paced open loop (its own generator:
 *      autocannon's rate option sends in bursts), and reports the latency there;
 *   3b. the 429 path: a third proxy (CPU 0, only for this phase) with
 *      `rateLimit.perCredential: { points: 1, duration: 3600 }`; one request spends a fresh
 *      credential's point, then max(3, BENCH_ROUNDS / 2) rounds on the warmed pages with that token,
 *      interleaved with the baseline: every answer must be 429; req/s, p50/p99, server CPU per 429,
 *      the ratio to the baseline, and the Redis commands meanwhile (refusals decided in memory);
 *   4. Redis bytes per stored page against the raw JSON;
 *   5. coalescing: 500 concurrent cold requests for one key, split across the 2 proxies, with a
 *      slow upstream → upstream requests (goal 1);
 *   6. the in-process breakdown of a hit's microseconds (bench/hit-breakdown.ts).
 *
 * Targets (PASS/MISS, never the exit code): hits ≥ 0.35× the baseline's throughput (goal 0.5×),
 * p99 ≤ 5 ms at half that load, 0 upstream requests during hits, 1 upstream request for 500
 * coalesced ones, stored bytes ≤ 0.4× the raw JSON, a 429 in < 1000 µs of proxy CPU with every
 * answer of the 429 rounds a 429. The exit code is non-zero only when something
 * failed to run. Settings: BENCH_ROUNDS (6), BENCH_SECONDS (3), BENCH_CONNECTIONS (32),
 * BENCH_WARMUP_SECONDS (2), BENCH_CPU_PROF (a directory: proxy 1 writes a V8 CPU profile there),
 * BENCH_NODE_FLAGS (extra node flags for the proxies, e.g. `--max-semi-space-size=32`),
 * BENCH_L1_TTL (the proxies' `cache.l1.ttl`, seconds; default the built-in 1 s).
 *
 * On a small VM a round's figures swing (±40% for the proxy: host noise, and a server that goes
 * idle between requests pays for being woken): many short interleaved rounds, medians, and the
 * ratio of each round's pair are reported, with the spread.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { type Socket, connect } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { API_PREFIX, RESOURCE_NAMES } from '../src/catalog/resources.js';
import { freePort } from '../src/dev/free-port.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { type BreakdownReport, formatBreakdown, runHitBreakdown } from './hit-breakdown.js';

const RESOURCES = RESOURCE_NAMES;
const COMPANIES = SANDBOX_COMPANIES.map(String);
const PAGE_COUNT = 50;
const PER_PAGE = 30;
const KEY_PREFIX = 'slab';

const TARGETS = { ratio: 0.35, ratioGoal: 0.5, halfLoadP99Ms: 5, upstreamDuringHits: 0, coalescedUpstream: 1, storedRatio: 0.4, rateLimitedCpuUs: 1000 };

/** The hit phase's inbound limits: on, shared through Redis, never refusing. */
const NEVER_REFUSING = { points: 10_000_000, duration: 1 } as const;
/** The 429 phase's credential policy: one request an hour, used up before the rounds. */
const ONE_POINT = { points: 1, duration: 3600 } as const;
const LIMITS_ON = 'limits on: shared through Redis, never refusing';

// ───────────────────────────── the load worker (its own process) ─────────────────────────────

interface LoadRequest {
  readonly path: string;
  readonly authorization?: string;
}

interface LoadSpec {
  readonly url: string;
  readonly connections: number;
  readonly durationSec: number;
  /** Requests per second for all connections together; absent: as fast as the server answers. */
  readonly overallRate?: number;
  /** The status whose answers are counted as completed and timed; absent: any 2xx. */
  readonly expectStatus?: number;
  readonly requests: readonly LoadRequest[];
}

function isExpected(spec: LoadSpec, status: number): boolean {
  return spec.expectStatus === undefined ? status >= 200 && status < 300 : status === spec.expectStatus;
}

interface LoadResult {
  /** Answers with the expected status (any 2xx unless the spec names one): the ones timed. */
  readonly completed: number;
  /** Every answer, whatever its status. */
  readonly responses: number;
  readonly durationSec: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Readonly<Record<string, number>>;
  /** The load generator's process CPU over the run, % of one core. */
  readonly clientCpuPct: number;
  /** Paced load only: the gaps between the generator's 1 ms ticks (a late tick sends a burst). */
  readonly tickGapP99Ms?: number;
  readonly tickGapMaxMs?: number;
}

/** Latencies at 1 µs resolution up to 100 ms (autocannon's own histogram has 1 ms steps). */
class MicrosecondHistogram {
  readonly #buckets = new Uint32Array(100_001);
  #count = 0;
  #max = 0;

  record(ms: number): void {
    const us = Math.round(ms * 1000);
    this.#buckets[Math.min(us, 100_000)] = (this.#buckets[Math.min(us, 100_000)] ?? 0) + 1;
    this.#count += 1;
    if (us > this.#max) this.#max = us;
  }

  get count(): number {
    return this.#count;
  }

  get maxMs(): number {
    return this.#max / 1000;
  }

  percentileMs(p: number): number {
    if (this.#count === 0) return Number.NaN;
    const rank = Math.ceil((p / 100) * this.#count);
    let seen = 0;
    for (let us = 0; us < this.#buckets.length; us++) {
      seen += this.#buckets[us] ?? 0;
      if (seen >= rank) return us / 1000;
    }
    return this.#max / 1000;
  }
}

async function loadWorker(specFile: string): Promise<void> {
  const spec = JSON.parse(readFileSync(specFile, 'utf8')) as LoadSpec;
  const histogram = new MicrosecondHistogram();
  let responses = 0;
  const cpuBefore = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationSec,
        ...(spec.overallRate !== undefined && { overallRate: spec.overallRate }),
        requests: spec.requests.map((r) => ({
          method: 'GET' as const,
          path: r.path,
          headers: r.authorization === undefined ? {} : { authorization: r.authorization },
        })),
      },
      (error: unknown, done: autocannon.Result) => (error === null || error === undefined ? resolve(done) : reject(error instanceof Error ? error : new Error(String(error)))),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      responses += 1;
      if (isExpected(spec, statusCode)) histogram.record(responseTime);
    });
  });
  const wallUs = Number(process.hrtime.bigint() - startedAt) / 1e3;
  const cpu = process.cpuUsage(cpuBefore);
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stat.count ?? 0;
  const out: LoadResult = {
    completed: histogram.count,
    responses,
    durationSec: result.duration,
    rps: histogram.count / result.duration,
    p50Ms: histogram.percentileMs(50),
    p90Ms: histogram.percentileMs(90),
    p99Ms: histogram.percentileMs(99),
    p999Ms: histogram.percentileMs(99.9),
    maxMs: histogram.maxMs,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    clientCpuPct: (100 * (cpu.user + cpu.system)) / wallUs,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/**
 * An open-loop, paced load: requests become due at `overallRate` per second (checked every
 * millisecond) whatever the answers, each is sent on an idle keep-alive connection (one request in
 * flight per connection, no pipelining), and its latency runs from the tick at which it became due,
 * so time spent waiting for a free connection counts (no coordinated omission). autocannon's own
 * rate option sends each connection's whole per-second quota back to back at the start of every
 * second, which measures a saturated server in bursts, not a server at half load.
 */
async function pacedWorker(specFile: string): Promise<void> {
  const spec = JSON.parse(readFileSync(specFile, 'utf8')) as LoadSpec;
  const rate = spec.overallRate;
  if (rate === undefined || rate <= 0) throw new Error('paced load needs overallRate');
  const target = new URL(spec.url);
  const port = Number(target.port);
  const payloads = spec.requests.map((r) =>
    Buffer.from(`GET ${r.path} HTTP/1.1\r\nHost: ${target.host}\r\n${r.authorization === undefined ? '' : `Authorization: ${r.authorization}\r\n`}\r\n`, 'latin1'),
  );
  if (payloads.length === 0) throw new Error('no requests');
  const histogram = new MicrosecondHistogram();
  const statusCodes: Record<string, number> = {};
  let errors = 0;
  let next = 0;
  const total = Math.round(rate * spec.durationSec);
  let due = 0;
  let completed = 0;
  /** Tick times (ms) of due requests not sent yet. */
  const waiting: number[] = [];
  let waitingHead = 0;

  interface Connection {
    readonly socket: Socket;
    dueAt: number;
    pending: Buffer;
  }
  const idle: Connection[] = [];
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });

  const dispatch = (): void => {
    while (waitingHead < waiting.length && idle.length > 0) {
      const connection = idle.pop() as Connection;
      connection.dueAt = waiting[waitingHead++] as number;
      connection.socket.write(payloads[next++ % payloads.length] as Buffer);
    }
    if (waitingHead > 4096 && waitingHead * 2 > waiting.length) {
      waiting.splice(0, waitingHead);
      waitingHead = 0;
    }
  };

  const onData = (connection: Connection, chunk: Buffer): void => {
    connection.pending = connection.pending.length === 0 ? chunk : Buffer.concat([connection.pending, chunk]);
    for (;;) {
      const headerEnd = connection.pending.indexOf('\r\n\r\n');
      if (headerEnd === -1) return;
      const head = connection.pending.subarray(0, headerEnd).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
      const end = headerEnd + 4 + length;
      if (connection.pending.length < end) return;
      const status = head.slice(9, 12);
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      if (isExpected(spec, Number(status))) histogram.record(performance.now() - connection.dueAt);
      connection.pending = connection.pending.subarray(end);
      completed += 1;
      idle.push(connection);
      if (completed >= total) finish();
    }
  };

  const connections = await Promise.all(
    Array.from({ length: spec.connections }, async () => {
      const socket = connect({ host: target.hostname, port });
      socket.setNoDelay(true);
      await once(socket, 'connect');
      const connection: Connection = { socket, dueAt: 0, pending: Buffer.alloc(0) };
      socket.on('data', (chunk: Buffer) => {
        onData(connection, chunk);
        dispatch();
      });
      socket.on('error', () => {
        errors += 1;
      });
      return connection;
    }),
  );
  idle.push(...connections);

  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  const gaps = new MicrosecondHistogram();
  let lastTick = startedAt;
  const tick = setInterval(() => {
    const now = performance.now();
    gaps.record(now - lastTick);
    lastTick = now;
    const shouldBe = Math.min(total, Math.floor(((now - startedAt) * rate) / 1000));
    while (due < shouldBe) {
      waiting.push(now);
      due += 1;
    }
    dispatch();
  }, 1);
  const deadline = setTimeout(finish, spec.durationSec * 1000 + 5_000);
  await finished;
  const elapsedMs = performance.now() - startedAt;
  clearInterval(tick);
  clearTimeout(deadline);
  const cpu = process.cpuUsage(cpuBefore);
  for (const connection of connections) connection.socket.destroy();
  const ok = histogram.count;
  const out: LoadResult = {
    completed: ok,
    responses: completed,
    durationSec: elapsedMs / 1000,
    rps: completed / (elapsedMs / 1000),
    p50Ms: histogram.percentileMs(50),
    p90Ms: histogram.percentileMs(90),
    p99Ms: histogram.percentileMs(99),
    p999Ms: histogram.percentileMs(99.9),
    maxMs: histogram.maxMs,
    non2xx: completed - ok,
    errors: errors + (total - completed),
    timeouts: 0,
    statusCodes,
    clientCpuPct: (100 * (cpu.user + cpu.system)) / (elapsedMs * 1000),
    tickGapP99Ms: gaps.percentileMs(99),
    tickGapMaxMs: gaps.maxMs,
  };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

// ───────────────────────────── processes ─────────────────────────────

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const TASKSET = commandExists('taskset');
const SERVER_CPU = 0;
const CLIENT_CPU = 1;
const CLK_TCK = clockTicks();

function commandExists(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}

/** Pins every thread of a running process (this one included) to one CPU. */
function pin(pid: number, cpu: number): void {
  if (!TASKSET || cpus().length < 2) return;
  execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
}

interface Launched {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<void>;
  output(): string;
  errors(): string;
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
}

const running = new Set<ChildProcess>();

function launch(name: string, command: string, args: readonly string[], options: { env: NodeJS.ProcessEnv; cpu?: number; stdout: 'pipe' | 'ignore' }): Launched {
  const pinned = options.cpu !== undefined && TASKSET && cpus().length >= 2;
  const child = pinned
    ? spawn('taskset', ['-c', String(options.cpu), command, ...args], { cwd: ROOT, env: options.env, stdio: ['ignore', options.stdout, 'pipe'] })
    : spawn(command, [...args], { cwd: ROOT, env: options.env, stdio: ['ignore', options.stdout, 'pipe'] });
  if (child.pid === undefined) throw new Error(`cannot start ${name} (${command})`);
  running.add(child);
  let out = '';
  let err = '';
  const wakers: Array<() => void> = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    if (out.length < 65_536) out += chunk.toString('utf8');
    for (const wake of wakers.splice(0)) wake();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    if (err.length < 65_536) err += chunk.toString('utf8');
  });
  let exitedFlag = false;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exitedFlag = true;
      running.delete(child);
      for (const wake of wakers.splice(0)) wake();
      resolve();
    });
    child.once('error', (error) => {
      err += String(error);
      exitedFlag = true;
      running.delete(child);
      resolve();
    });
  });
  return {
    name,
    child,
    pid: child.pid,
    exited,
    output: () => out,
    errors: () => err,
    waitForLine(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${name}: not ready after ${timeoutMs} ms; stderr: ${err.slice(-800)}`)), timeoutMs);
        const check = (): void => {
          const match = out.match(pattern);
          if (match !== null) {
            clearTimeout(timer);
            resolve(match);
          } else if (exitedFlag) {
            clearTimeout(timer);
            reject(new Error(`${name} exited before it was ready; stderr: ${err.slice(-800)}`));
          } else {
            wakers.push(check);
          }
        };
        check();
      });
    },
  };
}

async function stop(launched: Launched): Promise<void> {
  const { child } = launched;
  if (child.exitCode !== null || child.signalCode !== null || !running.has(child)) return;
  child.kill('SIGTERM');
  const killed = await Promise.race([launched.exited.then(() => true), delay(3_000).then(() => false)]);
  if (!killed) {
    child.kill('SIGKILL');
    await launched.exited;
  }
}

/** The run's temporary directory (config, page bytes, load specs), removed however the run ends. */
let scratchDir: string | undefined;

function killEverything(): void {
  if (scratchDir !== undefined) {
    rmSync(scratchDir, { recursive: true, force: true });
    scratchDir = undefined;
  }
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  running.clear();
}

/** user + system CPU time of a process, µs (Linux /proc). */
function processCpuUs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1e6) / CLK_TCK : undefined;
  } catch {
    return undefined;
  }
}

/** Polls the admin plane's /readyz: the proxy has no other readiness signal with stdout discarded. */
async function waitReady(launched: Launched, adminPort: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void launched.exited.then(() => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${launched.name} exited at start; stderr: ${launched.errors().slice(-800)}`);
    try {
      const response = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
      await response.arrayBuffer();
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await delay(50);
  }
  throw new Error(`${launched.name}: /readyz not 200 after ${timeoutMs} ms; stderr: ${launched.errors().slice(-800)}`);
}

// ───────────────────────────── HTTP helpers ─────────────────────────────

interface Fetched {
  readonly status: number;
  readonly body: Buffer;
  readonly cacheStatus: string;
}

async function get(url: string, authorization?: string): Promise<Fetched> {
  const response = await fetch(url, { headers: authorization === undefined ? {} : { authorization } });
  const body = Buffer.from(await response.arrayBuffer());
  return { status: response.status, body, cacheStatus: response.headers.get('cache-status') ?? '' };
}

async function control(base: string, method: string, action: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${base}/__sandbox/${action}`, {
    method,
    ...(body !== undefined && { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const value: unknown = await response.json();
  if (!response.ok) throw new Error(`sandbox ${method} ${action}: ${response.status} ${JSON.stringify(value)}`);
  return value;
}

interface SandboxStats {
  readonly served: number;
  readonly byTarget: Readonly<Record<string, number>>;
}

async function sandboxStats(base: string): Promise<SandboxStats> {
  const value = await control(base, 'GET', 'stats');
  if (typeof value !== 'object' || value === null || !('served' in value) || typeof value.served !== 'number' || !('byTarget' in value)) {
    throw new Error('sandbox stats: unexpected shape');
  }
  const byTarget: Record<string, number> = {};
  if (typeof value.byTarget === 'object' && value.byTarget !== null) {
    for (const [target, count] of Object.entries(value.byTarget)) if (typeof count === 'number') byTarget[target] = count;
  }
  return { served: value.served, byTarget };
}

// ───────────────────────────── figures ─────────────────────────────

function median(values: readonly number[]): number {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
const verdict = (ok: boolean): string => (ok ? 'PASS' : 'MISS');

function envInt(name: string, fallback: number, min: number, max: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}`);
  return value;
}

function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

// ───────────────────────────── the bench ─────────────────────────────

interface Page {
  readonly company: string;
  readonly resource: string;
  /** Path and query as the client sends it (already canonical: sorted, per_page explicit). */
  readonly path: string;
  readonly query: string;
  readonly body: Buffer;
}

interface Round {
  /** `rate-limited`: the 429 phase's proxy, every answer refused. */
  readonly target: 'baseline' | 'proxy' | 'rate-limited';
  readonly load: LoadResult;
  readonly serverCpuPct: number;
  readonly serverUsPerRequest: number;
}

async function runLoad(workDir: string, spec: LoadSpec, label: string): Promise<LoadResult> {
  const specFile = join(workDir, `load-${label}.json`);
  writeFileSync(specFile, JSON.stringify(spec));
  const mode = spec.overallRate === undefined ? '--load-worker' : '--paced-worker';
  const worker = launch(`load (${label})`, process.execPath, [SELF, mode, specFile], { env: { PATH: process.env.PATH ?? '' }, cpu: CLIENT_CPU, stdout: 'pipe' });
  await worker.exited;
  const line = worker.output().trim().split('\n').pop() ?? '';
  if (worker.child.exitCode !== 0 || !line.startsWith('{')) throw new Error(`load worker failed (${String(worker.child.exitCode)}): ${worker.errors().slice(-800)}`);
  return JSON.parse(line) as LoadResult;
}

/** 500 concurrent GETs of one key, alternating between the proxies. */
async function coalesce(proxies: readonly number[], path: string, authorization: string, total: number): Promise<{ statuses: Record<string, number>; cache: Record<string, number>; ms: number }> {
  const agents = proxies.map(() => new Agent({ keepAlive: true, maxSockets: Math.ceil(total / proxies.length) }));
  const statuses: Record<string, number> = {};
  const cache: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: total }, (_, i) => {
      const index = i % proxies.length;
      return new Promise<void>((resolve) => {
        const req = request(
          { host: '127.0.0.1', port: proxies[index], path, agent: agents[index], headers: { authorization } },
          (res) => {
            res.resume();
            res.on('end', () => {
              const status = String(res.statusCode ?? 0);
              statuses[status] = (statuses[status] ?? 0) + 1;
              const header = res.headers['cache-status'];
              const kind = typeof header !== 'string' ? 'none' : header.includes('collapsed') ? 'collapsed' : header.includes('fwd=miss') ? 'miss (leader)' : header.includes('hit') ? 'hit' : header;
              cache[kind] = (cache[kind] ?? 0) + 1;
              resolve();
            });
          },
        );
        req.on('error', (error) => {
          statuses[`error ${error.message}`] = (statuses[`error ${error.message}`] ?? 0) + 1;
          resolve();
        });
        req.end();
      });
    }),
  );
  const ms = performance.now() - started;
  for (const agent of agents) agent.destroy();
  return { statuses, cache, ms };
}

async function bench(): Promise<number> {
  const rounds = envInt('BENCH_ROUNDS', 6, 1, 40);
  const seconds = envInt('BENCH_SECONDS', 3, 1, 120);
  const connections = envInt('BENCH_CONNECTIONS', 32, 1, 1024);
  const warmupSeconds = envInt('BENCH_WARMUP_SECONDS', 2, 0, 60);
  const benchStarted = performance.now();
  /** BENCH_CPU_PROF=<dir>: proxy 1 writes a V8 CPU profile there when it stops (before the breakdown). */
  const profileDir = process.env.BENCH_CPU_PROF === undefined || process.env.BENCH_CPU_PROF === '' ? undefined : process.env.BENCH_CPU_PROF;

  const mainJs = join(ROOT, 'dist', 'main.js');
  try {
    readFileSync(mainJs);
  } catch {
    throw new Error(`${mainJs} is missing: run \`npm run build\` first (npm run bench does)`);
  }
  const pinned = TASKSET && cpus().length >= 2;
  // The orchestrator stays off the server's core; children are pinned explicitly.
  if (pinned) pin(process.pid, CLIENT_CPU);

  const workDir = mkdtempSync(join(tmpdir(), 'slab-bench-'));
  scratchDir = workDir;
  const secret = randomBytes(48).toString('base64url');
  const path = process.env.PATH ?? '';

  say('slab-ops-proxy benchmark: cache hits against bare node:http');
  say(`machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}`);
  say(
    pinned
      ? `pinning: servers on CPU ${SERVER_CPU} (baseline, proxy 1, the 429 phase's proxy 3), autocannon on CPU ${CLIENT_CPU} (taskset); redis, sandbox, proxy 2 on CPU ${CLIENT_CPU}`
      : 'pinning: OFF (no taskset or one CPU): server and load generator share the CPUs, figures are rough',
  );
  say(`load: autocannon, ${connections} connections, ${rounds} interleaved rounds × ${seconds} s per server, ${warmupSeconds} s warm-up each`);
  say();

  try {
    // ── processes ──
    const redisPort = await freePort();
    const redis = launch('redis-server', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'], {
      env: { PATH: path },
      cpu: CLIENT_CPU,
      stdout: 'pipe',
    });
    await redis.waitForLine(/Ready to accept connections/, 10_000);
    const redisUrl = `redis://127.0.0.1:${redisPort}`;

    const sandboxPort = await freePort();
    const sandbox = launch('sandbox', process.execPath, ['dist/sandbox/main.js'], {
      env: { PATH: path, SANDBOX_PORT: String(sandboxPort), SANDBOX_CONTROL: '1', SANDBOX_RATE_LIMIT: '0', JWT_SECRET: secret },
      cpu: CLIENT_CPU,
      stdout: 'pipe',
    });
    await sandbox.waitForLine(/listening on (http:\/\/\S+)/, 10_000);
    const sandboxBase = `http://127.0.0.1:${sandboxPort}`;

    // Long TTLs so that nothing expires during the run; limits on (shared through Redis) but high
    // enough never to answer 429. The 429 phase's proxy gets the same file with one credential point.
    const writeConfig = (name: string, perCredential: { points: number; duration: number }): string => {
      const file = join(workDir, name);
      writeFileSync(
        file,
        [
          'cache:',
          '  defaults: { ttl: 3600, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 }',
          '  resources:',
          ...RESOURCES.map((r) => `    ${r}: { ttl: 3600 }`),
          // BENCH_L1_TTL: the in-process copy's lifetime in seconds (default: the built-in 1 s).
          ...(process.env.BENCH_L1_TTL === undefined ? [] : [`  l1: { maxBytes: 67108864, ttl: ${String(Number(process.env.BENCH_L1_TTL))} }`]),
          'rateLimit:',
          `  perCredential: { points: ${perCredential.points}, duration: ${perCredential.duration} }`,
          `  perCompany: { points: ${NEVER_REFUSING.points}, duration: ${NEVER_REFUSING.duration} }`,
          '',
        ].join('\n'),
      );
      return file;
    };
    const configFile = writeConfig('bench.yaml', NEVER_REFUSING);
    // BENCH_NODE_FLAGS: extra V8/Node flags for the proxies, to compare settings in one command.
    const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== '');
    const startProxy = async (name: string, config: string, cpu: number, extraFlags: readonly string[]): Promise<{ proxy: Launched; port: number }> => {
      const port = await freePort();
      const adminPort = await freePort();
      const proxy = launch(name, process.execPath, [...nodeFlags, ...extraFlags, 'dist/main.js'], {
        env: {
          PATH: path,
          NODE_ENV: 'production',
          HOST: '127.0.0.1',
          PORT: String(port),
          ADMIN_PORT: String(adminPort),
          UPSTREAM_URL: sandboxBase,
          REDIS_URL: redisUrl,
          JWT_SECRET: secret,
          LOG_LEVEL: 'info',
          CONFIG_FILE: config,
        },
        cpu,
        stdout: 'ignore',
      });
      await waitReady(proxy, adminPort, 15_000);
      return { proxy, port };
    };
    const proxyPorts: number[] = [];
    const proxies: Launched[] = [];
    for (let i = 0; i < 2; i++) {
      const profile = i === 0 && profileDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
      const { proxy, port } = await startProxy(`proxy ${i + 1}`, configFile, i === 0 ? SERVER_CPU : CLIENT_CPU, profile);
      proxies.push(proxy);
      proxyPorts.push(port);
    }
    const proxy1 = proxies[0] as Launched;
    const proxyBase = `http://127.0.0.1:${proxyPorts[0]}`;

    // ── tokens (the CLI, signed with the run's secret) ──
    const tokens = new Map<string, string>();
    for (const company of COMPANIES) {
      const { stdout } = await promisify(execFile)(process.execPath, ['dist/cli/token.js', '--company', company], { cwd: ROOT, env: { PATH: path, JWT_SECRET: secret } });
      tokens.set(company, stdout.trim());
    }
    const bearer = (company: string): string => `Bearer ${tokens.get(company) ?? ''}`;

    // ── warm 50 pages through proxy 1 (keyset walks), check they are hits and the upstream's bytes ──
    // Keyset walks: every company's resources, and company 1's movements by item type (distinct
    // paths: the baseline serves by path). Queries are written canonically (sorted, per_page).
    const walks: Array<{ company: string; resource: string; filter: string; limit: number }> = [];
    for (const company of COMPANIES) {
      for (const resource of RESOURCES) {
        walks.push({ company, resource, filter: '', limit: company === '1' && resource === 'movements' ? Number.POSITIVE_INFINITY : 3 });
      }
    }
    for (const itemType of ['offcut', 'remnant', 'slab']) walks.push({ company: '1', resource: 'movements', filter: `item_type=${itemType}`, limit: 4 });
    const groups: Page[][] = [];
    for (const walk of walks) {
      const { company, resource } = walk;
      const full: Page[] = [];
      let after: number | undefined;
      for (let step = 0; step < 50 && full.length < walk.limit; step++) {
        const query = [after === undefined ? '' : `after_id=${after}`, walk.filter, `per_page=${PER_PAGE}`].filter((part) => part !== '').join('&');
        const pagePath = `${API_PREFIX}/${resource}?${query}`;
        const fetched = await get(`${proxyBase}${pagePath}`, bearer(company));
        if (fetched.status !== 200) throw new Error(`warming ${pagePath} (company ${company}): ${fetched.status} ${fetched.body.toString('utf8').slice(0, 200)}`);
        const parsed = JSON.parse(fetched.body.toString('utf8')) as { data: unknown[]; meta: { has_more: boolean; next_after_id: number | null } };
        if (parsed.data.length === PER_PAGE) full.push({ company, resource, path: pagePath, query, body: fetched.body });
        if (!parsed.meta.has_more || parsed.meta.next_after_id === null) break;
        after = parsed.meta.next_after_id;
      }
      if (full.length > 0) groups.push(full);
    }
    // Company 1's movements first (the keyset walk), then one page per other group in turn. Paths
    // are distinct too (two companies' first pages share one), so the baseline can serve by path.
    const pages: Page[] = [...(groups[0] ?? [])].slice(0, PAGE_COUNT);
    const paths = new Set(pages.map((p) => p.path));
    for (let depth = 0; pages.length < PAGE_COUNT; depth++) {
      let added = false;
      for (const group of groups.slice(1)) {
        const page = group[depth];
        if (page !== undefined && pages.length < PAGE_COUNT && !paths.has(page.path)) {
          pages.push(page);
          paths.add(page.path);
          added = true;
        }
      }
      if (!added && groups.every((g) => g.length <= depth)) break;
    }
    if (pages.length < PAGE_COUNT) throw new Error(`only ${pages.length} full pages of ${PER_PAGE} records found`);
    let hits = 0;
    let identical = 0;
    for (const page of pages) {
      const again = await get(`${proxyBase}${page.path}`, bearer(page.company));
      if (again.status === 200 && again.cacheStatus.includes('hit') && again.body.equals(page.body)) hits += 1;
      const direct = await get(`${sandboxBase}${page.path}`, bearer(page.company));
      if (direct.status === 200 && direct.body.equals(page.body)) identical += 1;
    }
    const rawBytes = pages.reduce((sum, p) => sum + p.body.length, 0) / pages.length;
    const companiesUsed = [...new Set(pages.map((p) => p.company))].join(', ');
    say(`pages: ${pages.length} distinct pages of ${PER_PAGE} records (companies ${companiesUsed}; ${groups[0]?.length ?? 0} from company 1's movements keyset walk), ${fmtInt(rawBytes)} bytes of JSON on average`);
    say(`  cache hits on a second read: ${hits}/${pages.length}; proxy bytes identical to the upstream's: ${identical}/${pages.length}`);
    if (hits !== pages.length) throw new Error('the warmed pages are not all cache hits');

    // ── the baseline, with the same bytes by path ──
    const pagesFile = join(workDir, 'pages.json');
    writeFileSync(pagesFile, JSON.stringify(Object.fromEntries(pages.map((p) => [p.path, p.body.toString('base64')]))));
    const baselinePort = await freePort();
    const baseline = launch('baseline', process.execPath, [join(ROOT, 'dist-bench', 'bench', 'baseline-server.js')], {
      env: { PATH: path, BASELINE_PAGES: pagesFile, BASELINE_PORT: String(baselinePort) },
      cpu: SERVER_CPU,
      stdout: 'pipe',
    });
    await baseline.waitForLine(/baseline listening on \d+/, 10_000);
    const baselineBase = `http://127.0.0.1:${baselinePort}`;
    const check = await get(`${baselineBase}${pages[0]?.path ?? '/'}`);
    if (check.status !== 200 || !check.body.equals(pages[0]?.body ?? Buffer.alloc(0))) throw new Error(`the baseline does not serve the page bytes: ${check.status} ${check.body.length} vs ${pages[0]?.body.length ?? 0}`);

    // ── hit phase: interleaved rounds ──
    const requests = pages.map((p) => ({ path: p.path, authorization: bearer(p.company) }));
    const specFor = (target: 'baseline' | 'proxy', durationSec: number, overallRate?: number): LoadSpec => ({
      url: target === 'proxy' ? proxyBase : baselineBase,
      connections,
      durationSec,
      ...(overallRate !== undefined && { overallRate }),
      requests,
    });
    const measured = async (target: Round['target'], spec: LoadSpec, label: string, pidOverride?: number): Promise<Round> => {
      const pid = pidOverride ?? (target === 'proxy' ? proxy1.pid : baseline.pid);
      const cpuBefore = processCpuUs(pid);
      const load = await runLoad(workDir, spec, label);
      const cpuAfter = processCpuUs(pid);
      const serverCpuUs = cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : cpuAfter - cpuBefore;
      return {
        target,
        load,
        serverCpuPct: (100 * serverCpuUs) / (load.durationSec * 1e6),
        // Per answer of any status (the 429 phase's answers are all refusals, the hits all 2xx).
        serverUsPerRequest: serverCpuUs / Math.max(1, load.responses),
      };
    };
    const describe = (r: Round): string =>
      `${fmtInt(r.load.rps).padStart(7)} req/s  p50 ${fmt(r.load.p50Ms)} ms  p99 ${fmt(r.load.p99Ms)} ms  ` +
      `server CPU ${fmt(r.serverCpuPct, 0)}% (${fmt(r.serverUsPerRequest, 1)} µs/req)  client CPU ${fmt(r.load.clientCpuPct, 0)}%` +
      (r.load.non2xx + r.load.errors > 0 ? `  non-2xx ${r.load.non2xx} errors ${r.load.errors}` : '');

    const servedBefore = (await sandboxStats(sandboxBase)).served;
    say();
    say(`hit phase (${LIMITS_ON}: per credential and per company ${fmtInt(NEVER_REFUSING.points)} per ${NEVER_REFUSING.duration} s, so every hit pays the shared limit decision)`);
    if (warmupSeconds > 0) {
      await runLoad(workDir, specFor('baseline', warmupSeconds), 'warmup-baseline');
      await runLoad(workDir, specFor('proxy', warmupSeconds), 'warmup-proxy');
    }
    const results: Round[] = [];
    for (let round = 1; round <= rounds; round++) {
      const order: Array<'baseline' | 'proxy'> = round % 2 === 1 ? ['baseline', 'proxy'] : ['proxy', 'baseline'];
      for (const target of order) {
        const r = await measured(target, specFor(target, seconds), `${target}-${round}`);
        results.push(r);
        say(`  round ${round} ${target.padEnd(8)} ${describe(r)}`);
      }
    }
    const of = (target: 'baseline' | 'proxy'): Round[] => results.filter((r) => r.target === target);
    const summarize = (rs: readonly Round[]) => {
      return {
        rps: median(rs.map((r) => r.load.rps)),
        p50: median(rs.map((r) => r.load.p50Ms)),
        p99: median(rs.map((r) => r.load.p99Ms)),
        serverCpuPct: median(rs.map((r) => r.serverCpuPct)),
        usPerRequest: median(rs.map((r) => r.serverUsPerRequest)),
        clientCpuPct: median(rs.map((r) => r.load.clientCpuPct)),
        non2xx: rs.reduce((s, r) => s + r.load.non2xx + r.load.errors, 0),
      };
    };
    const summary = (target: 'baseline' | 'proxy') => summarize(of(target));
    const base = summary('baseline');
    const hit = summary('proxy');
    const hit429 = of('proxy').reduce((sum, r) => sum + (r.load.statusCodes['429'] ?? 0), 0);
    const ratio = hit.rps / base.rps;
    const cpuRatio = base.usPerRequest / hit.usPerRequest;
    // Each round's proxy/baseline pair ran back to back: their ratio cancels slow drifts.
    const pairRatios: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const b = of('baseline')[round];
      const h = of('proxy')[round];
      if (b !== undefined && h !== undefined) pairRatios.push(h.load.rps / b.load.rps);
    }
    const spread = (values: readonly number[], digits: number): string =>
      values.length === 0 ? 'n/a' : `${fmt(Math.min(...values), digits)}–${fmt(Math.max(...values), digits)}`;

    // ── half load ──
    const halfRate = Math.max(1, Math.round(hit.rps / 2));
    const halfProxy = await measured('proxy', specFor('proxy', seconds, halfRate), 'half-proxy');
    const halfBaseline = await measured('baseline', specFor('baseline', seconds, halfRate), 'half-baseline');
    const upstreamDuringHits = (await sandboxStats(sandboxBase)).served - servedBefore;

    say();
    say(`  medians of ${rounds} rounds         req/s     p50 ms   p99 ms   server CPU   µs CPU/req   client CPU`);
    const row = (name: string, s: ReturnType<typeof summary>): string =>
      `  ${name.padEnd(28)} ${fmtInt(s.rps).padStart(9)} ${fmt(s.p50).padStart(9)} ${fmt(s.p99).padStart(8)} ${`${fmt(s.serverCpuPct, 0)}%`.padStart(12)} ${fmt(s.usPerRequest, 1).padStart(12)} ${`${fmt(s.clientCpuPct, 0)}%`.padStart(12)}`;
    say(row('bare node:http baseline', base));
    say(row('proxy cache hits, limits on', hit));
    if (base.clientCpuPct >= 90 && base.serverCpuPct < 90) {
      say(`  note: autocannon used ${fmt(base.clientCpuPct, 0)}% of its core while the baseline server used ${fmt(base.serverCpuPct, 0)}% of its own:`);
      say('        the baseline is bounded by the load generator, so the req/s ratio flatters the proxy; the CPU-per-request ratio does not.');
    }
    say(`  spread over rounds: proxy ${spread(of('proxy').map((r) => r.load.rps), 0)} req/s, baseline ${spread(of('baseline').map((r) => r.load.rps), 0)} req/s`);
    say(`  throughput ratio proxy/baseline (medians): ${fmt(ratio, 3)}  (target ≥ ${TARGETS.ratio}, goal ${TARGETS.ratioGoal}): ${verdict(ratio >= TARGETS.ratio)}${ratio >= TARGETS.ratioGoal ? ' (goal met)' : ''}`);
    say(`  per-round pair ratios: median ${fmt(median(pairRatios), 3)}, range ${spread(pairRatios, 3)}`);
    say(`  CPU-cost ratio baseline µs/req ÷ proxy µs/req: ${fmt(cpuRatio, 3)}  (what the ratio would be with both servers CPU-bound)`);
    say(`  all hit responses 2xx: ${verdict(hit.non2xx === 0 && base.non2xx === 0)} (${hit.non2xx} non-2xx/errors from the proxy, ${base.non2xx} from the baseline)`);
    say(`  ${LIMITS_ON}: ${hit429} answers 429 during the proxy's rounds`);
    say();
    say(`half load: ${fmtInt(halfRate)} req/s offered (half the proxy's median), ${seconds} s, paced open loop (latency from when each request is due)`);
    const tail = (r: Round): string =>
      `p99.9 ${fmt(r.load.p999Ms)} ms  max ${fmt(r.load.maxMs)} ms  (generator ticks: p99 gap ${fmt(r.load.tickGapP99Ms ?? Number.NaN)} ms, max ${fmt(r.load.tickGapMaxMs ?? Number.NaN)} ms)`;
    say(`  proxy     ${describe(halfProxy)}`);
    say(`            ${tail(halfProxy)}`);
    say(`  baseline  ${describe(halfBaseline)}`);
    say(`            ${tail(halfBaseline)}`);
    say(`  the baseline's p99 at the same rate is this machine's floor; a late generator tick sends its overdue requests as one burst.`);
    say(`  proxy p99 at half load ${fmt(halfProxy.load.p99Ms)} ms (target ≤ ${TARGETS.halfLoadP99Ms} ms): ${verdict(halfProxy.load.p99Ms <= TARGETS.halfLoadP99Ms)}`);
    say();
    say(`upstream requests during the hit phase (warm-ups, rounds, half load): ${upstreamDuringHits} (target ${TARGETS.upstreamDuringHits}): ${verdict(upstreamDuringHits === 0)}`);

    // ── the 429 path: a third proxy, on the server's core, only while this phase runs ──
    // Same config but one credential point an hour. Its credential (its own `sub`) is no other
    // phase's, so the shared count in Redis is this phase's alone; its first request spends the
    // point, the second is refused by Redis, and every later one is refused from memory
    // (rate-limiter-flexible's inMemoryBlockOnConsumed) until the window resets.
    const limitedConfig = writeConfig('bench-429.yaml', ONE_POINT);
    const { proxy: limitedProxy, port: limitedPort } = await startProxy('proxy 3 (429)', limitedConfig, SERVER_CPU, []);
    const limitedBase = `http://127.0.0.1:${limitedPort}`;
    const limitedSub = 'bench-rate-limited';
    const { stdout: limitedTokenOut } = await promisify(execFile)(process.execPath, ['dist/cli/token.js', '--company', '1', '--sub', limitedSub], {
      cwd: ROOT,
      env: { PATH: path, JWT_SECRET: secret },
    });
    const limitedBearer = `Bearer ${limitedTokenOut.trim()}`;
    const firstPage = pages[0]?.path ?? '/';
    const spend = await get(`${limitedBase}${firstPage}`, limitedBearer);
    const refusedOnce = await fetch(`${limitedBase}${firstPage}`, { headers: { authorization: limitedBearer } });
    const refusedBody = await refusedOnce.text();
    let refusedCode = '';
    try {
      const problem: unknown = JSON.parse(refusedBody);
      if (typeof problem === 'object' && problem !== null && 'code' in problem && typeof problem.code === 'string') refusedCode = problem.code;
    } catch {
      // not JSON: reported below as an empty code
    }
    const refusalShape =
      `${refusedOnce.status} ${refusedOnce.headers.get('content-type') ?? '-'} code ${refusedCode || '-'}, ` +
      `Retry-After ${refusedOnce.headers.get('retry-after') ?? '-'}, RateLimit ${refusedOnce.headers.get('ratelimit') ?? '-'}`;
    const limitedRequests = pages.map((p) => ({ path: p.path, authorization: limitedBearer }));
    const limitedSpec = (durationSec: number): LoadSpec => ({ url: limitedBase, connections, durationSec, expectStatus: 429, requests: limitedRequests });
    const infoClient = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
    /** Commands Redis has processed, all clients (INFO does not count itself, but the next INFO counts it). */
    const redisCommands = async (): Promise<number> => Number(/total_commands_processed:(\d+)/.exec(await infoClient.info('stats'))?.[1] ?? Number.NaN);
    const limitedRounds = Math.max(3, Math.ceil(rounds / 2));
    say();
    say(
      `429 path: proxy 3 (CPU ${pinned ? SERVER_CPU : 'any'}, started for this phase) with rateLimit.perCredential ${ONE_POINT.points} per ${ONE_POINT.duration} s; ` +
        `token sub ${limitedSub} (company 1), its point spent by one request (${spend.status}${spend.cacheStatus === '' ? '' : `, ${spend.cacheStatus}`})`,
    );
    say(`  the next answer: ${refusalShape}`);
    say(`  ${limitedRounds} rounds × ${seconds} s, ${connections} connections, the ${pages.length} warmed pages with that token, interleaved with the baseline`);
    // A short warm-up (the path is short; the baseline is warm already): keeps the phase cheap.
    if (warmupSeconds > 0) await runLoad(workDir, limitedSpec(Math.min(warmupSeconds, 1)), 'warmup-429');
    const limitedResults: Round[] = [];
    const limitedBaselines: Round[] = [];
    // Redis commands from every client during the 429 rounds, and during the baseline rounds (no
    // proxy traffic at all: the proxies' own background work), for comparison.
    let redisDuringRefusals = 0;
    let redisDuringBaseline = 0;
    for (let round = 1; round <= limitedRounds; round++) {
      const order: Array<'baseline' | 'rate-limited'> = round % 2 === 1 ? ['baseline', 'rate-limited'] : ['rate-limited', 'baseline'];
      for (const target of order) {
        if (target === 'baseline') {
          const commandsBefore = await redisCommands();
          const r = await measured('baseline', specFor('baseline', seconds), `429-baseline-${round}`);
          redisDuringBaseline += (await redisCommands()) - commandsBefore - 1;
          limitedBaselines.push(r);
          say(`  round ${round} ${'baseline'.padEnd(12)} ${describe(r)}`);
        } else {
          const commandsBefore = await redisCommands();
          const r = await measured('rate-limited', limitedSpec(seconds), `429-${round}`, limitedProxy.pid);
          redisDuringRefusals += (await redisCommands()) - commandsBefore - 1;
          limitedResults.push(r);
          const other = r.load.responses - r.load.completed + r.load.errors + r.load.timeouts;
          say(
            `  round ${round} ${'429s'.padEnd(12)} ${fmtInt(r.load.rps).padStart(7)} req/s  p50 ${fmt(r.load.p50Ms)} ms  p99 ${fmt(r.load.p99Ms)} ms  ` +
              `server CPU ${fmt(r.serverCpuPct, 0)}% (${fmt(r.serverUsPerRequest, 1)} µs/req)  client CPU ${fmt(r.load.clientCpuPct, 0)}%  non-429 ${other}`,
          );
        }
      }
    }
    infoClient.disconnect();
    await stop(limitedProxy);
    const refused = summarize(limitedResults);
    const refusedBase = summarize(limitedBaselines);
    const refusals = limitedResults.reduce((sum, r) => sum + r.load.completed, 0);
    const non429 = limitedResults.reduce((sum, r) => sum + r.load.responses - r.load.completed + r.load.errors + r.load.timeouts, 0);
    const non429Statuses: Record<string, number> = {};
    for (const r of limitedResults) {
      for (const [status, count] of Object.entries(r.load.statusCodes)) if (status !== '429') non429Statuses[status] = (non429Statuses[status] ?? 0) + count;
    }
    const limitedRatio = refused.rps / refusedBase.rps;
    const limitedPairRatios: number[] = [];
    for (let round = 0; round < limitedRounds; round++) {
      const b = limitedBaselines[round];
      const l = limitedResults[round];
      if (b !== undefined && l !== undefined) limitedPairRatios.push(l.load.rps / b.load.rps);
    }
    const rateLimitedFast = refused.usPerRequest < TARGETS.rateLimitedCpuUs;
    say();
    say(`  medians of ${limitedRounds} rounds         req/s     p50 ms   p99 ms   server CPU   µs CPU/req   client CPU`);
    say(row('bare node:http baseline', refusedBase));
    say(row('proxy 429s (refused)', refused));
    say(`  spread over rounds: 429s ${spread(limitedResults.map((r) => r.load.rps), 0)} req/s, baseline ${spread(limitedBaselines.map((r) => r.load.rps), 0)} req/s`);
    say(`  throughput ratio 429s/baseline (medians): ${fmt(limitedRatio, 3)}; per-round pair ratios: median ${fmt(median(limitedPairRatios), 3)}, range ${spread(limitedPairRatios, 3)}`);
    say(`  against the hit phase (${LIMITS_ON}): 429s ${fmtInt(refused.rps)} req/s vs hits ${fmtInt(hit.rps)} req/s (${fmt(refused.rps / hit.rps, 2)}×); µs CPU/req ${fmt(refused.usPerRequest, 1)} vs ${fmt(hit.usPerRequest, 1)}`);
    say(
      `  every answer 429: ${verdict(non429 === 0 && refusals > 0)} (${fmtInt(refusals)} × 429, ${non429} non-429 answers, errors and timeouts` +
        `${non429 === 0 ? '' : `: ${JSON.stringify(non429Statuses)}`})`,
    );
    say(
      `  Redis commands, all clients: ${redisDuringRefusals} during the 429 rounds (${fmt(redisDuringRefusals / Math.max(1, refusals), 4)} per 429), ` +
        `${redisDuringBaseline} during the baseline rounds (the proxies' background work alone): refusals decided in memory (inMemoryBlockOnConsumed)` +
        `${redisDuringRefusals > 2 * redisDuringBaseline + 100 ? ' — NOT SO: the refusals ask Redis' : ''}`,
    );
    say(
      `  a 429 is decided in well under a millisecond of proxy time: ${fmt(refused.usPerRequest, 1)} µs server CPU per 429 (target < ${TARGETS.rateLimitedCpuUs} µs): ${verdict(rateLimitedFast)}; ` +
        `p99 ${fmt(refused.p99)} ms, p50 ${fmt(refused.p50)} ms under closed-loop load (${connections} connections)`,
    );

    // ── Redis bytes per stored page ──
    const redisClient = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
    const scanned: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redisClient.scan(cursor, 'MATCH', `${KEY_PREFIX}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) if (!key.endsWith(':gen') && !key.includes(':lease:')) scanned.push(key);
    } while (cursor !== '0');
    const found = new Set(scanned);
    let stored = 0;
    let storedStrlen = 0;
    let raw = 0;
    let measuredKeys = 0;
    for (const page of pages) {
      const key = `${KEY_PREFIX}:{${page.company}:${page.resource}}:co:list:${page.query}`;
      if (!found.has(key)) continue;
      const usage = await redisClient.call('MEMORY', 'USAGE', key);
      const length = await redisClient.strlen(key);
      if (typeof usage !== 'number') continue;
      stored += usage;
      storedStrlen += length;
      raw += page.body.length;
      measuredKeys += 1;
    }
    redisClient.disconnect();
    const storedRatio = stored / raw;
    say();
    say(`Redis bytes per stored page: ${measuredKeys}/${pages.length} page keys found by SCAN MATCH ${KEY_PREFIX}:* (${scanned.length} entry keys in all)`);
    say(
      `  MEMORY USAGE ${fmtInt(stored / measuredKeys)} B, value ${fmtInt(storedStrlen / measuredKeys)} B, raw JSON ${fmtInt(raw / measuredKeys)} B → ` +
        `${fmt(storedRatio, 3)}× (value alone ${fmt(storedStrlen / raw, 3)}×) (target ≤ ${TARGETS.storedRatio}): ${verdict(measuredKeys === pages.length && storedRatio <= TARGETS.storedRatio)}`,
    );

    // ── coalescing: 500 cold requests for one key, across both proxies, slow upstream ──
    const coldPath = `${API_PREFIX}/movements?item_type=slab&movement_type=sale`;
    await control(sandboxBase, 'POST', 'reset');
    await control(sandboxBase, 'PUT', 'faults', { latencyMs: 300, resource: 'movements' });
    const storm = await coalesce(proxyPorts, coldPath, bearer('1'), 500);
    const afterStorm = await sandboxStats(sandboxBase);
    await control(sandboxBase, 'POST', 'reset');
    const coldUpstream = Object.entries(afterStorm.byTarget)
      .filter(([target]) => target.startsWith(`${API_PREFIX}/movements`))
      .reduce((sum, [, count]) => sum + count, 0);
    say();
    say(`coalescing: 500 concurrent cold requests for ${coldPath}, 250 to each proxy, upstream slowed by 300 ms`);
    say(`  done in ${fmt(storm.ms, 0)} ms; statuses ${JSON.stringify(storm.statuses)}; Cache-Status ${JSON.stringify(storm.cache)}`);
    say(`  upstream requests for that key: ${coldUpstream} (all upstream requests: ${afterStorm.served}) (target ${TARGETS.coalescedUpstream}): ${verdict(coldUpstream === TARGETS.coalescedUpstream && storm.statuses['200'] === 500)}`);

    // ── the breakdown, in this process, on the server's core, with the servers stopped ──
    await Promise.all([...proxies, sandbox, baseline].map((p) => stop(p)));
    if (pinned) pin(process.pid, SERVER_CPU);
    say();
    say(`where a hit's microseconds go (in-process, real modules of src/, CPU ${pinned ? SERVER_CPU : 'any'}; bench/hit-breakdown.ts)`);
    const breakdown: BreakdownReport = await runHitBreakdown({
      redisUrl,
      secret,
      pages: pages.map((p) => ({ path: p.path, body: p.body, company: p.company })),
      hitsPerSecond: hit.rps,
    });
    say(formatBreakdown(breakdown));
    const gap = hit.usPerRequest - base.usPerRequest;
    say(
      `  measured under load: proxy ${fmt(hit.usPerRequest, 1)} µs CPU/req − baseline ${fmt(base.usPerRequest, 1)} = ${fmt(gap, 1)} µs per hit beyond the bare server; ` +
        `in-process estimate ${fmt(breakdown.extraOverBaselineUs, 1)} µs`,
    );
    say(
      `  the rest is the machine, not a stage: a server that goes idle between requests pays to be woken (at half load the CPU per request rose to ` +
        `${fmt(halfProxy.serverUsPerRequest, 1)} µs for the proxy and ${fmt(halfBaseline.serverUsPerRequest, 1)} µs for the baseline), and a larger code and heap footprint runs ` +
        `slower between syscalls than in a tight loop; fewer allocations and fewer awaits per hit shrink both.`,
    );
    const ranked = Object.entries(breakdown.groups).sort((a, b) => b[1] - a[1]);
    say(`  largest groups: ${ranked.map(([g, us]) => `${g} ${fmt(us, 1)} µs`).join(', ')}`);
    if (pinned) pin(process.pid, CLIENT_CPU);

    await stop(redis);
    const elapsed = (performance.now() - benchStarted) / 1000;
    const pass = {
      ratio: ratio >= TARGETS.ratio,
      halfLoadP99: halfProxy.load.p99Ms <= TARGETS.halfLoadP99Ms,
      upstreamDuringHits: upstreamDuringHits === 0,
      coalescing: coldUpstream === TARGETS.coalescedUpstream,
      storedBytes: storedRatio <= TARGETS.storedRatio,
      rateLimitedAll429: non429 === 0 && refusals > 0,
      rateLimitedUnderMs: rateLimitedFast,
    };
    say();
    say(`done in ${fmt(elapsed, 0)} s; ${Object.values(pass).every(Boolean) ? 'every target met' : `missed: ${Object.entries(pass).filter(([, ok]) => !ok).map(([name]) => name).join(', ')}`}`);
    say(
      JSON.stringify({
        baseline: { rps: Math.round(base.rps), p50_ms: base.p50, p99_ms: base.p99, us_cpu_per_req: round2(base.usPerRequest), server_cpu_pct: round2(base.serverCpuPct), client_cpu_pct: round2(base.clientCpuPct) },
        proxy: {
          rps: Math.round(hit.rps),
          p50_ms: hit.p50,
          p99_ms: hit.p99,
          us_cpu_per_req: round2(hit.usPerRequest),
          server_cpu_pct: round2(hit.serverCpuPct),
          client_cpu_pct: round2(hit.clientCpuPct),
          limits: LIMITS_ON,
          answers_429: hit429,
        },
        ratio: round3(ratio),
        pair_ratio_median: round3(median(pairRatios)),
        pair_ratio_range: [round3(Math.min(...pairRatios)), round3(Math.max(...pairRatios))],
        cpu_ratio: round3(cpuRatio),
        half_load: { rate: halfRate, p50_ms: halfProxy.load.p50Ms, p99_ms: halfProxy.load.p99Ms, baseline_p99_ms: halfBaseline.load.p99Ms },
        upstream_during_hits: upstreamDuringHits,
        rate_limited: {
          rounds: limitedRounds,
          rps: Math.round(refused.rps),
          p50_ms: refused.p50,
          p99_ms: refused.p99,
          us_cpu_per_req: round2(refused.usPerRequest),
          server_cpu_pct: round2(refused.serverCpuPct),
          client_cpu_pct: round2(refused.clientCpuPct),
          baseline_rps: Math.round(refusedBase.rps),
          ratio: round3(limitedRatio),
          pair_ratio_median: round3(median(limitedPairRatios)),
          vs_hits: round3(refused.rps / hit.rps),
          answers_429: refusals,
          non_429: non429,
          redis_commands: redisDuringRefusals,
          redis_commands_background: redisDuringBaseline,
          target_us_cpu_per_req: TARGETS.rateLimitedCpuUs,
        },
        coalescing: { requests: 500, upstream: coldUpstream, statuses: storm.statuses },
        redis: { stored_ratio: round3(storedRatio), value_ratio: round3(storedStrlen / raw), raw_bytes: Math.round(raw / measuredKeys) },
        breakdown_us: Object.fromEntries([...Object.entries(breakdown.groups).map(([g, us]) => [g, round2(us)]), ['data_plane', round2(breakdown.dataPlaneUs)]]),
        pass,
        seconds: Math.round(elapsed),
      }),
    );
    return 0;
  } finally {
    killEverything();
  }
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

function round3(n: number): number {
  return Math.round(n * 1000) / 1000;
}

// ───────────────────────────── entry ─────────────────────────────

process.on('exit', killEverything);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killEverything();
    process.exit(130);
  });
}

if (process.argv[2] === '--load-worker' || process.argv[2] === '--paced-worker') {
  const specFile = process.argv[3];
  if (specFile === undefined) {
    process.stderr.write('usage: run.js --load-worker|--paced-worker <spec.json>\n');
    process.exit(2);
  }
  (process.argv[2] === '--load-worker' ? loadWorker(specFile) : pacedWorker(specFile)).catch((error: unknown) => {
    process.stderr.write(`load worker: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
} else {
  bench().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      killEverything();
      process.exit(1);
    },
  );
}
