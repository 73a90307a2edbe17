/**
 * Many credentials: one cached page read with a crowd of distinct valid tokens, in
 * batches, by a proxy on the in-process store (the inbound limits then count every credential in
 * this process). Each token is new to the proxy: verified once, counted in a new window. What must
 * hold: no batch markedly slower than the others (per-credential state costs time in proportion to
 * what it frees) and memory bounded.
 *
 *   node dist-bench/bench/phases/many-credentials.js    (also the last phase of `npm run bench`)
 *
 * Settings: MANY_CREDENTIALS_TOKENS (250000), MANY_CREDENTIALS_BATCH (25000),
 * MANY_CREDENTIALS_CONNECTIONS (32), BENCH_NODE_FLAGS (flags for the proxy's node, e.g. --cpu-prof).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { cpuUsOf } from '../lib/cpu.js';
import { envInt } from '../lib/env.js';
import { fmt, fmtInt, say, textTable, verdict } from '../lib/format.js';
import { CLIENT_CPU, canPin, pin, runProgram, SERVER_CPU, scratchDir, stop } from '../lib/processes.js';
import { requireBuild, startProxy, startSandbox } from '../lib/services.js';
import { median } from '../lib/stats.js';

/** No batch slower than this many times the median batch. */
export const TARGET_BATCH_RATIO = 2;
/** The proxy's resident memory after the last batch, at most. */
export const TARGET_RSS_MB = 400;

export interface ManyCredentialsSettings {
  readonly tokens: number;
  readonly batch: number;
  readonly connections: number;
  /** Extra flags for the proxy's node (BENCH_NODE_FLAGS, as `npm run bench` takes them). */
  readonly nodeFlags: readonly string[];
}

export interface BatchFigures {
  readonly seconds: number;
  readonly proxyCpuSeconds: number;
  readonly rssMb: number;
  readonly statuses: Readonly<Record<string, number>>;
}

export interface ManyCredentialsFigures {
  readonly settings: ManyCredentialsSettings;
  readonly batches: readonly BatchFigures[];
  readonly medianSeconds: number;
  readonly slowestRatio: number;
  readonly rssMb: number;
  readonly pass: boolean;
}

const PAGE = `${API_PREFIX}/receipts?per_page=30`;
const HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

/** An HS256 token of company 1 with the permission the page needs, its subject and id its own. */
function mint(secret: string, n: number, expires: number): string {
  const payload = Buffer.from(
    JSON.stringify({
      company_id: 1,
      permissions: ['view_slab', 'view_slab_logistics'],
      sub: `crowd-${String(n)}`,
      jti: `c${String(n)}`,
      exp: expires,
    }),
  ).toString('base64url');
  const signature = createHmac('sha256', secret).update(`${HEADER}.${payload}`).digest('base64url');
  return `${HEADER}.${payload}.${signature}`;
}

/** Resident memory of a process, MB (VmRSS). */
function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
  return match === null ? Number.NaN : Number(match[1]) / 1024;
}

/** Every token of the batch once, `connections` requests at a time; the answers' statuses. */
async function sendBatch(pool: Pool, tokens: readonly string[], connections: number): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {};
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tokens.length) {
      const token = tokens[next++] as string;
      const res = await pool.request({ method: 'GET', path: PAGE, headers: { authorization: `Bearer ${token}` } });
      await res.body.dump();
      statuses[String(res.statusCode)] = (statuses[String(res.statusCode)] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return statuses;
}

function writeConfig(dir: string): string {
  const file = join(dir, 'many-credentials.yaml');
  // Windows of a minute per credential (the whole run's tokens stay live), nothing ever refused.
  writeFileSync(
    file,
    [
      'cache:',
      '  defaults: { ttl: 3600, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 }',
      'rateLimit:',
      '  perCredential: { points: 1000, duration: 60 }',
      '  perCompany: { points: 10000000, duration: 1 }',
      '',
    ].join('\n'),
  );
  return file;
}

export async function runManyCredentials(settings: ManyCredentialsSettings): Promise<ManyCredentialsFigures> {
  const dir = scratchDir('slab-many-credentials-');
  const secret = randomBytes(48).toString('base64url');
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxy = await startProxy({
    name: 'proxy (many credentials)',
    upstreamUrl: sandbox.url,
    secret,
    configFile: writeConfig(dir),
    logLevel: 'info',
    cpu: SERVER_CPU,
    nodeFlags: settings.nodeFlags,
  });
  const pool = new Pool(proxy.url, { connections: settings.connections, pipelining: 1 });
  const expires = Math.floor(Date.now() / 1000) + 3600;
  say(
    `many credentials: ${fmtInt(settings.tokens)} distinct tokens of company 1, in batches of ${fmtInt(settings.batch)} after ${fmtInt(Math.min(settings.batch, 5_000))} to warm up, ` +
      `${String(settings.connections)} connections, one cached page, the in-process store (proxy on CPU ${canPin() ? String(SERVER_CPU) : 'any'})`,
  );
  const batches: BatchFigures[] = [];
  try {
    // The page is cached, and the code warmed, before the first batch: every answer after it is a
    // hit, and no batch pays the compiler's first work.
    const warmUp = Math.min(settings.batch, 5_000);
    await sendBatch(pool, [mint(secret, -1, expires)], 1);
    await sendBatch(
      pool,
      Array.from({ length: warmUp }, (_, i) => mint(secret, -2 - i, expires)),
      settings.connections,
    );
    for (let first = 1; first <= settings.tokens; first += settings.batch) {
      const count = Math.min(settings.batch, settings.tokens - first + 1);
      const tokens = Array.from({ length: count }, (_, i) => mint(secret, first + i, expires));
      const cpuBefore = cpuUsOf([proxy.launched.pid]) ?? Number.NaN;
      const started = performance.now();
      const statuses = await sendBatch(pool, tokens, settings.connections);
      const seconds = (performance.now() - started) / 1000;
      const proxyCpuSeconds = ((cpuUsOf([proxy.launched.pid]) ?? Number.NaN) - cpuBefore) / 1e6;
      const figures = { seconds, proxyCpuSeconds, rssMb: rssMb(proxy.launched.pid), statuses };
      batches.push(figures);
      say(
        `  batch ${String(batches.length)}: ${fmt(seconds, 2)} s, proxy CPU ${fmt(proxyCpuSeconds, 2)} s, RSS ${fmt(figures.rssMb, 0)} MB, ${JSON.stringify(statuses)}`,
      );
    }
  } finally {
    await pool.close();
    await Promise.all([stop(proxy.launched), stop(sandbox.launched)]);
  }
  const medianSeconds = median(batches.map((b) => b.seconds));
  const slowestRatio = Math.max(...batches.map((b) => b.seconds)) / medianSeconds;
  const finalRss = batches.at(-1)?.rssMb ?? Number.NaN;
  const allOk = batches.every((b) => Object.keys(b.statuses).every((status) => status === '200'));
  const pass = allOk && slowestRatio <= TARGET_BATCH_RATIO && finalRss < TARGET_RSS_MB;
  for (const line of textTable(
    ['batches', 'median s', 'slowest / median', 'RSS after the last', 'every answer 200'],
    [
      [
        String(batches.length),
        fmt(medianSeconds, 2),
        fmt(slowestRatio, 2),
        `${fmt(finalRss, 0)} MB`,
        allOk ? 'yes' : 'no',
      ],
    ],
  ))
    say(line);
  say(
    `  no batch slower than ${String(TARGET_BATCH_RATIO)}× the median, RSS < ${String(TARGET_RSS_MB)} MB: ${verdict(pass)}`,
  );
  return { settings, batches, medianSeconds, slowestRatio, rssMb: finalRss, pass };
}

export function manyCredentialsSettings(): ManyCredentialsSettings {
  return {
    tokens: envInt('MANY_CREDENTIALS_TOKENS', 250_000, 1, 10_000_000),
    batch: envInt('MANY_CREDENTIALS_BATCH', 25_000, 1, 10_000_000),
    connections: envInt('MANY_CREDENTIALS_CONNECTIONS', 32, 1, 1024),
    nodeFlags: (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((flag) => flag !== ''),
  };
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  runProgram('many-credentials', async () => {
    requireBuild();
    if (canPin()) pin(process.pid, CLIENT_CPU);
    const figures = await runManyCredentials(manyCredentialsSettings());
    say(
      `MANY_CREDENTIALS_RESULT ${JSON.stringify({
        batches_s: figures.batches.map((b) => Math.round(b.seconds * 100) / 100),
        proxy_cpu_s: figures.batches.map((b) => Math.round(b.proxyCpuSeconds * 100) / 100),
        rss_mb: figures.batches.map((b) => Math.round(b.rssMb)),
        slowest_ratio: Math.round(figures.slowestRatio * 100) / 100,
        pass: figures.pass,
      })}`,
    );
    return 0;
  });
}
