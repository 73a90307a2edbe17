/**
 * Freshness (docs/benchmarks.md#freshness): the live sandbox changes its records by a workload
 * (bench/lib/workloads.ts: `mixed`, `pages`, `append`, `move`) while readers of four companies read
 * a Zipf mix of its pages through a proxy; every answer is judged against the change log
 * (bench/lib/freshness.ts). Each run starts its own sandbox and proxy from the same seed: `fixed`,
 * the shipped TTLs alone (the yardstick); `invalidated`, the same TTLs with the sandbox sending each
 * change to the proxy's `/admin/cache/invalidate` (docs/cache.md#soft-invalidation) and every TTL
 * raised to a safety net's (bench/lib/fed-lifetimes.ts); `auto`,
 * automatic lifetimes; `still`, nothing changing (the readers' latency without changes). Reported
 * per run: the share of stale answers (a change older than 1 s missing), staleness by resource,
 * what the upstream served per minute (200s, 304s) and the readers' latency of list pages; judged:
 * the invalidated and automatic runs' targets.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';
import { neverRefusingLimits } from '../lib/bench-config.js';
import { envInt } from '../lib/env.js';
import { awaitLifetimes, FED_TTL, raiseFedLifetimes } from '../lib/fed-lifetimes.js';
import { fmtInt, say } from '../lib/format.js';
import { type FreshnessFigures, figureLines, judge, scoreAnswers } from '../lib/freshness-figures.js';
import { readOpenLoop, sandboxFeed, webhookCounts } from '../lib/freshness-run.js';
import { sandboxControl } from '../lib/http.js';
import { CLIENT_CPU, SERVER_CPU, scratchDir, stop } from '../lib/processes.js';
import { startProxy, startSandbox } from '../lib/services.js';
import { type FreshnessWorkload, prepareWorkload } from '../lib/workloads.js';

export type { FreshnessFigures } from '../lib/freshness-figures.js';
export type { FreshnessWorkload } from '../lib/workloads.js';

export interface FreshnessSettings {
  readonly seconds: number;
  readonly perSecond: number;
  /**
   * Seconds the `pages` workload is read before it is measured: lifetimes learnt from refreshes
   * (and a fixed TTL's refreshes) reach their steady state, which a cold start would not show.
   */
  readonly warmupSeconds: number;
  /** The `auto` run's ceiling on early refreshes, a second (`cache.autoTtl.maxRefreshesPerSecond`). */
  readonly autoCeiling: number;
}

/**
 * How the proxy learns of changes in a run: its shipped TTLs alone (`fixed`), the sandbox's
 * webhook too (`invalidated`), or each page's own lifetime (`auto`: every resource with `autoTtl`,
 * docs/cache.md#automatic-lifetimes); `still`: the workload's pages read with nothing changing.
 */
export type FreshnessVariant = 'fixed' | 'invalidated' | 'auto' | 'still';

/** The automatic lifetimes the `auto` variant gives every resource, seconds. */
export const AUTO_TTL = { min: 1, max: 300 } as const;

/** The auto run's targets, against the fixed run on the same workload. */
export const AUTO_STALE_RATIO = 0.5;
export const AUTO_P99_RATIO = 0.5;

/** The invalidated runs' targets: stale answers and staleness p99 at most these. */
export const INVALIDATED_STALE_SHARE = 0.01;
export const INVALIDATED_P99_MS = 1_000;
/** The invalidated runs' upstream requests at most this × (the changes' pages + cold misses). */
export const INVALIDATED_UPSTREAM_RATIO = 1.2;
/** The invalidated runs' list pages' latency p99 at most this × the same pages' with nothing changing. */
export const INVALIDATED_LIST_P99_RATIO = 2;

/**
 * The runs of the phase, in order: the shipped TTLs and invalidations on the `mixed` workload; on
 * the `pages` workload nothing changing, the shipped TTLs, invalidations and automatic lifetimes;
 * the log's pages with nothing changing; the shipped TTLs and invalidations on `append` and `move`.
 */
export const FRESHNESS_RUNS = {
  fixed: ['fixed', 'mixed'],
  invalidated: ['invalidated', 'mixed'],
  pagesStill: ['still', 'pages'],
  pagesFixed: ['fixed', 'pages'],
  pagesInvalidated: ['invalidated', 'pages'],
  pagesAuto: ['auto', 'pages'],
  logStill: ['still', 'append'],
  appendFixed: ['fixed', 'append'],
  appendInvalidated: ['invalidated', 'append'],
  moveFixed: ['fixed', 'move'],
  moveInvalidated: ['invalidated', 'move'],
} as const satisfies Readonly<Record<string, readonly [FreshnessVariant, FreshnessWorkload]>>;

export type FreshnessRuns = Readonly<Record<keyof typeof FRESHNESS_RUNS, FreshnessFigures>>;

export function freshnessSettings(): FreshnessSettings {
  return {
    seconds: envInt('BENCH_FRESHNESS_SECONDS', 40, 5, 3600),
    perSecond: envInt('BENCH_FRESHNESS_RATE', 200, 1, 5000),
    warmupSeconds: envInt('BENCH_FRESHNESS_WARMUP_SECONDS', 60, 0, 3600),
    autoCeiling: envInt(
      'BENCH_FRESHNESS_AUTO_CEILING',
      BUILT_IN_CONFIG.cache.autoTtl.maxRefreshesPerSecond,
      0,
      100_000,
    ),
  };
}

/** The shipped cache policies (config/default.yaml), or with automatic lifetimes; nothing ever refused. */
function writeConfig(dir: string, variant: FreshnessVariant, settings: FreshnessSettings): string {
  const file = join(dir, 'freshness.yaml');
  const shipped = BUILT_IN_CONFIG.cache.resources;
  const auto = RESOURCE_NAMES.map((name) => {
    const ttl = shipped[name]?.ttl;
    return `    ${name}: { ${ttl === undefined ? '' : `ttl: ${String(ttl)}, `}autoTtl: { min: ${String(AUTO_TTL.min)}, max: ${String(AUTO_TTL.max)} } }`;
  });
  writeFileSync(
    file,
    [
      ...(variant === 'auto'
        ? ['cache:', `  autoTtl: { maxRefreshesPerSecond: ${String(settings.autoCeiling)} }`, '  resources:', ...auto]
        : []),
      ...neverRefusingLimits(),
      '',
    ].join('\n'),
  );
  return file;
}

/**
 * The `pages` workload's runs are read unmeasured first, every one of them, so that lifetimes reach
 * their steady state and the runs compare requests without their cold misses.
 */
function warmsUp(workload: FreshnessWorkload, settings: FreshnessSettings): boolean {
  return workload === 'pages' && settings.warmupSeconds > 0;
}

export async function runFreshness(
  settings: FreshnessSettings,
  nodeFlags: readonly string[],
  variant: FreshnessVariant,
  workload: FreshnessWorkload = 'mixed',
): Promise<FreshnessFigures> {
  const dir = scratchDir('slab-freshness-');
  const secret = randomBytes(48).toString('base64url');
  const adminToken = randomBytes(24).toString('base64url');
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxy = await startProxy({
    name: `proxy (freshness, ${variant})`,
    upstreamUrl: sandbox.url,
    secret,
    configFile: writeConfig(dir, variant, settings),
    logLevel: 'info',
    cpu: SERVER_CPU,
    nodeFlags,
    env: { ADMIN_TOKEN: adminToken },
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  try {
    const { readers, live } = await prepareWorkload(workload, agent, sandbox.url, secret);
    const webhook = { url: `${proxy.adminUrl}/admin/cache/invalidate`, token: adminToken };
    if (variant === 'invalidated') {
      await raiseFedLifetimes(proxy.adminUrl, adminToken);
      await awaitLifetimes([proxy.adminUrl], adminToken, FED_TTL);
    }
    if (variant !== 'still')
      await sandboxControl(sandbox.url, 'PUT', 'live', { ...live, ...(variant === 'invalidated' && { webhook }) });
    if (warmsUp(workload, settings))
      await readOpenLoop([agent], proxy.url, readers, { ...settings, seconds: settings.warmupSeconds });
    const before = await sandboxControl(sandbox.url, 'GET', 'stats');
    const startedAt = Date.now();
    const answers = await readOpenLoop([agent], proxy.url, readers, settings);
    const after = await sandboxControl(sandbox.url, 'GET', 'stats');
    const feed = await sandboxFeed(sandbox.url);
    const figures = judge({
      scored: scoreAnswers(answers, feed),
      feed,
      targets: readers.targets,
      startedAt,
      seconds: settings.seconds,
      before,
      after,
    });
    report(figures, settings, variant, workload);
    if (variant === 'invalidated') {
      const counts = await webhookCounts(sandbox.url);
      say(`  webhook: ${fmtInt(counts.delivered)} changes delivered, ${fmtInt(counts.dropped)} dropped`);
    }
    return figures;
  } finally {
    agent.destroy();
    await stop(proxy.launched);
    await stop(sandbox.launched);
  }
}

/** Every run of FRESHNESS_RUNS in its order, each followed by a blank line. */
export async function runFreshnessRuns(nodeFlags: readonly string[]): Promise<FreshnessRuns> {
  const runs: Partial<Record<keyof typeof FRESHNESS_RUNS, FreshnessFigures>> = {};
  for (const [name, [variant, workload]] of Object.entries(FRESHNESS_RUNS)) {
    runs[name as keyof typeof FRESHNESS_RUNS] = await runFreshness(freshnessSettings(), nodeFlags, variant, workload);
    say();
  }
  return runs as FreshnessRuns;
}

const HOW: Readonly<Record<FreshnessVariant, string>> = {
  fixed: 'the shipped TTLs',
  invalidated: `each change sent to /admin/cache/invalidate, every TTL raised to ${String(FED_TTL)} s`,
  auto: `automatic lifetimes (${String(AUTO_TTL.min)}-${String(AUTO_TTL.max)} s)`,
  still: 'the shipped TTLs, nothing changing',
};
const WHAT: Readonly<Record<FreshnessWorkload, string>> = {
  mixed: 'mixed: 5% of records change every 3 s, 20% every minute',
  pages: 'pages: 5% of the pages read change every 3 s, 20% every minute, the rest never',
  append: "append: a new movement every 300 ms in each company, read on every page of the movements' lists",
  move: "move: 5% of the movements change item_type every 10 s, read on every page of the movements' lists",
};

function report(
  figures: FreshnessFigures,
  settings: FreshnessSettings,
  variant: FreshnessVariant,
  workload: FreshnessWorkload,
): void {
  say(
    `freshness (${variant}, ${workload}): the live sandbox (${WHAT[workload]}), ${HOW[variant]}${variant === 'auto' ? ` under a ceiling of ${String(settings.autoCeiling)} early refreshes a second` : ''}, ${String(settings.perSecond)} req/s Zipf over ${String(figures.pages)} pages of 4 companies, ${String(settings.seconds)} s${warmsUp(workload, settings) ? ` after ${String(settings.warmupSeconds)} s read unmeasured` : ''}`,
  );
  for (const line of figureLines(figures)) say(line);
}
