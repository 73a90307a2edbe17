/**
 * The freshness advice against what readers saw (docs/benchmarks.md#freshness): every record of
 * three resources changes at the times of a Poisson process of its own (docs/sandbox.md#live-mode,
 * `timing: poisson`), a mean of 5, 20 and 60 s by resource, under a TTL of 10 s and the shipped
 * stale-while-revalidate; readers of four companies read those record pages by Zipf through a proxy
 * for BENCH_ADVICE_SECONDS after as long read unmeasured. Reported per resource: the change interval
 * and stale share `GET /admin/cache/freshness` estimates (docs/cache.md#freshness-advice), the
 * share of answers stale by the judge (bench/lib/freshness.ts), and their ratio; judged: every
 * ratio within ±25%.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { neverRefusingLimits } from '../lib/bench-config.js';
import { envInt } from '../lib/env.js';
import { fmt, say, textTable } from '../lib/format.js';
import { groupStaleness, scoreAnswers } from '../lib/freshness-figures.js';
import { readerTokens, readOpenLoop, sandboxFeed } from '../lib/freshness-run.js';
import { sandboxControl } from '../lib/http.js';
import { CLIENT_CPU, SERVER_CPU, scratchDir, stop } from '../lib/processes.js';
import { startProxy, startSandbox } from '../lib/services.js';
import { recordTargets } from '../lib/workloads.js';

/** The resources changing, and the mean interval of each record's changes, ms. */
export const ADVICE_RATES = { remnants: 5_000, transfers: 20_000, fulfilments: 60_000 } as const;
/** The TTL the three resources are served under, seconds. */
const ADVICE_TTL = 10;
/** The estimate's target: within this share of the measured stale share either way. */
export const ADVICE_TOLERANCE = 0.25;

export interface AdviceRow {
  readonly resource: string;
  readonly meanChangeSeconds: number;
  readonly estimatedChangeSeconds: number | null;
  readonly refreshWaitSeconds: number | null;
  readonly estimatedStaleShare: number | null;
  readonly measuredStaleShare: number;
}

export interface AdviceFigures {
  readonly rows: readonly AdviceRow[];
  readonly pass: boolean;
}

interface AdviceJson {
  readonly resources: ReadonlyArray<{
    readonly resource: string;
    readonly change_interval_seconds: number | null;
    readonly refresh_wait_seconds: number | null;
    readonly stale_share_estimate: number | null;
  }>;
}

function writeConfig(dir: string): string {
  const file = join(dir, 'advice.yaml');
  const resources = Object.keys(ADVICE_RATES).map((name) => `    ${name}: { ttl: ${String(ADVICE_TTL)} }`);
  writeFileSync(file, ['cache:', '  resources:', ...resources, ...neverRefusingLimits(), ''].join('\n'));
  return file;
}

/** The ratio of estimate to measure, within the tolerance. */
export function withinTolerance(row: AdviceRow): boolean {
  if (row.estimatedStaleShare === null || row.measuredStaleShare === 0) return false;
  return Math.abs(row.estimatedStaleShare / row.measuredStaleShare - 1) <= ADVICE_TOLERANCE;
}

export async function runAdviceAccuracy(nodeFlags: readonly string[]): Promise<AdviceFigures> {
  const seconds = envInt('BENCH_ADVICE_SECONDS', 90, 10, 3600);
  const perSecond = envInt('BENCH_ADVICE_RATE', 200, 1, 5000);
  const secret = randomBytes(48).toString('base64url');
  const adminToken = randomBytes(24).toString('base64url');
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxy = await startProxy({
    name: 'proxy (freshness advice)',
    upstreamUrl: sandbox.url,
    secret,
    configFile: writeConfig(scratchDir('slab-advice-')),
    logLevel: 'info',
    cpu: SERVER_CPU,
    nodeFlags,
    env: { ADMIN_TOKEN: adminToken },
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  try {
    const tokens = await readerTokens(secret);
    const readers = { targets: await recordTargets(agent, sandbox.url, tokens, Object.keys(ADVICE_RATES)), tokens };
    const rules = Object.entries(ADVICE_RATES).map(([resource, everyMs]) => ({
      resource,
      kind: 'update',
      everyMs,
      timing: 'poisson',
    }));
    await sandboxControl(sandbox.url, 'PUT', 'live', { rules });
    await readOpenLoop([agent], proxy.url, readers, { seconds, perSecond });
    const answers = await readOpenLoop([agent], proxy.url, readers, { seconds, perSecond });
    const measured = groupStaleness(scoreAnswers(answers, await sandboxFeed(sandbox.url)), (a) => a.resource);
    const response = await fetch(`${proxy.adminUrl}/admin/cache/freshness`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    const advice = (await response.json()) as AdviceJson;
    const rows = Object.entries(ADVICE_RATES).map(([resource, everyMs]): AdviceRow => {
      const estimate = advice.resources.find((r) => r.resource === resource);
      const group = measured[resource];
      return {
        resource,
        meanChangeSeconds: everyMs / 1000,
        estimatedChangeSeconds: estimate?.change_interval_seconds ?? null,
        refreshWaitSeconds: estimate?.refresh_wait_seconds ?? null,
        estimatedStaleShare: estimate?.stale_share_estimate ?? null,
        measuredStaleShare: group === undefined || group.answers === 0 ? 0 : group.stale / group.answers,
      };
    });
    const figures = { rows, pass: rows.every(withinTolerance) };
    report(figures, seconds, perSecond, readers.targets.length);
    return figures;
  } finally {
    agent.destroy();
    await stop(proxy.launched);
    await stop(sandbox.launched);
  }
}

const orNa = (value: number | null, digits: number): string => (value === null ? 'n/a' : fmt(value, digits));

function report(figures: AdviceFigures, seconds: number, perSecond: number, pages: number): void {
  say(
    `freshness advice: every record of three resources changing at Poisson times (means ${Object.values(ADVICE_RATES)
      .map((ms) => `${String(ms / 1000)} s`)
      .join(
        ', ',
      )}), ttl ${String(ADVICE_TTL)} s, the shipped stale-while-revalidate; ${String(perSecond)} req/s Zipf over ${String(pages)} record pages, ${String(seconds)} s after ${String(seconds)} s unmeasured`,
  );
  const rows = figures.rows.map((row) => [
    row.resource,
    fmt(row.meanChangeSeconds, 0),
    orNa(row.estimatedChangeSeconds, 1),
    orNa(row.refreshWaitSeconds, 2),
    row.estimatedStaleShare === null ? 'n/a' : `${fmt(row.estimatedStaleShare * 100, 1)}%`,
    `${fmt(row.measuredStaleShare * 100, 1)}%`,
    row.estimatedStaleShare === null ? 'n/a' : `${fmt(row.estimatedStaleShare / row.measuredStaleShare)}×`,
  ]);
  const header = ['resource', 'change s', 'estimated s', 'wait s', 'est. stale', 'measured', 'ratio'];
  for (const line of textTable(header, rows)) say(`  ${line}`);
}
