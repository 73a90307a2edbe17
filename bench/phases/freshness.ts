/**
 * Freshness (docs/benchmarks.md#freshness): the live sandbox changes its records by the `mixed`
 * workload (docs/sandbox.md#live-mode) while readers of four companies read a Zipf mix of list and
 * record pages through a proxy; every answer is judged against the change log
 * (bench/lib/freshness.ts). Each variant starts its own sandbox and proxy from the same seed:
 * `fixed`, the shipped TTLs alone (the yardstick); `invalidated`, the same TTLs with the sandbox
 * sending each change to the proxy's `/admin/cache/invalidate` (docs/cache.md#soft-invalidation).
 * Reported per variant: the share of stale answers (a change older than 1 s missing), staleness by
 * resource, and what the upstream served per minute; judged: the invalidated run's targets.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { envInt } from '../lib/env.js';
import { fmtInt, say } from '../lib/format.js';
import { type FreshnessFigures, figureLines, judge, scoreAnswers } from '../lib/freshness-figures.js';
import { prepareReaders, readOpenLoop, sandboxFeed, webhookCounts } from '../lib/freshness-run.js';
import { sandboxControl } from '../lib/http.js';
import { CLIENT_CPU, SERVER_CPU, scratchDir, stop } from '../lib/processes.js';
import { startProxy, startSandbox } from '../lib/services.js';

export type { FreshnessFigures } from '../lib/freshness-figures.js';

export interface FreshnessSettings {
  readonly seconds: number;
  readonly perSecond: number;
}

/** How the proxy learns of changes in a run: its TTLs alone, or the sandbox's webhook too. */
export type FreshnessVariant = 'fixed' | 'invalidated';

/** The invalidated run's targets: stale answers and staleness p99 at most these. */
export const INVALIDATED_STALE_SHARE = 0.01;
export const INVALIDATED_P99_MS = 1_000;

export function freshnessSettings(): FreshnessSettings {
  return {
    seconds: envInt('BENCH_FRESHNESS_SECONDS', 40, 5, 3600),
    perSecond: envInt('BENCH_FRESHNESS_RATE', 200, 1, 5000),
  };
}

/** The shipped cache policies (config/default.yaml), nothing ever refused. */
function writeConfig(dir: string): string {
  const file = join(dir, 'freshness.yaml');
  writeFileSync(
    file,
    [
      'rateLimit:',
      '  perCredential: { points: 10000000, duration: 60 }',
      '  perCompany: { points: 10000000, duration: 60 }',
      '',
    ].join('\n'),
  );
  return file;
}

export async function runFreshness(
  settings: FreshnessSettings,
  nodeFlags: readonly string[],
  variant: FreshnessVariant,
): Promise<FreshnessFigures> {
  const dir = scratchDir('slab-freshness-');
  const secret = randomBytes(48).toString('base64url');
  const adminToken = randomBytes(24).toString('base64url');
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxy = await startProxy({
    name: `proxy (freshness, ${variant})`,
    upstreamUrl: sandbox.url,
    secret,
    configFile: writeConfig(dir),
    logLevel: 'info',
    cpu: SERVER_CPU,
    nodeFlags,
    env: { ADMIN_TOKEN: adminToken },
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  try {
    const readers = await prepareReaders(agent, sandbox.url, secret);
    const webhook = { url: `${proxy.adminUrl}/admin/cache/invalidate`, token: adminToken };
    await sandboxControl(sandbox.url, 'PUT', 'live', {
      preset: 'mixed',
      ...(variant === 'invalidated' && { webhook }),
    });
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
    report(figures, settings, variant);
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

function report(figures: FreshnessFigures, settings: FreshnessSettings, variant: FreshnessVariant): void {
  const how =
    variant === 'fixed' ? 'the shipped TTLs' : 'the shipped TTLs and each change sent to /admin/cache/invalidate';
  say(
    `freshness (${variant}): the live sandbox (mixed: 5% of records change every 3 s, 20% every minute), ${how}, ${String(settings.perSecond)} req/s Zipf over ${String(figures.pages)} pages of 4 companies, ${String(settings.seconds)} s`,
  );
  for (const line of figureLines(figures)) say(line);
}
