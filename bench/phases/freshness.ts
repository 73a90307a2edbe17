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
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { envInt } from '../lib/env.js';
import { fmt, fmtInt, say, textTable } from '../lib/format.js';
import { type Answered, ChangeFeed, type LoggedChange, staleness } from '../lib/freshness.js';
import { sandboxControl } from '../lib/http.js';
import { CLIENT_CPU, SERVER_CPU, scratchDir, stop } from '../lib/processes.js';
import { startProxy, startSandbox } from '../lib/services.js';
import { LatencyHistogram } from '../lib/stats.js';
import { zipfPicker } from '../lib/zipf.js';

/** A change missing from an answer for longer than this makes the answer stale. */
const STALE_AFTER_MS = 1_000;

export interface FreshnessSettings {
  readonly seconds: number;
  readonly perSecond: number;
}

/** How the proxy learns of changes in a run: its TTLs alone, or the sandbox's webhook too. */
export type FreshnessVariant = 'fixed' | 'invalidated';

/** The invalidated run's targets: stale answers and staleness p99 at most these. */
export const INVALIDATED_STALE_SHARE = 0.01;
export const INVALIDATED_P99_MS = 1_000;

export interface ResourceFreshness {
  readonly answers: number;
  readonly stale: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface FreshnessFigures {
  readonly answers: number;
  readonly staleShare: number;
  readonly p99Ms: number;
  readonly upstreamPerMinute: number;
  readonly notModifiedPerMinute: number;
  readonly upstreamKbPerMinute: number;
  readonly byResource: ReadonlyMap<string, ResourceFreshness>;
  /**
   * Changes the upstream made that a page read could show, per minute: for each page read, the
   * changes of its company and resource (a list) or of its record, during the run. With the cold
   * misses (one per page), what an invalidated run may ask of the upstream at most.
   */
  readonly pageChangesPerMinute: number;
  /** Pages read (each a cold miss once). */
  readonly pages: number;
  /** Stale answers by the path that served them (their `Cache-Status` without its numbers). */
  readonly staleByPath: ReadonlyMap<string, number>;
}

/** A page a reader asks for: its target and what it reads. */
/** An answer with the proxy's `Cache-Status` for it, to tell which path served the stale ones. */
type Judged = Answered & { readonly cacheStatus: string };

interface Target {
  readonly company: string;
  readonly resource: string;
  readonly path: string;
  readonly read: Answered['read'];
}

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

/** Each company's first list page of each resource, and its first three records by id. */
function targetsOf(companies: readonly string[], firstIds: ReadonlyMap<string, readonly number[]>): Target[] {
  return companies.flatMap((company) =>
    RESOURCE_NAMES.flatMap((resource) => [
      {
        company,
        resource,
        path: `${API_PREFIX}/${resource}?per_page=30`,
        read: { kind: 'list', filters: [], afterId: 0 },
      } as Target,
      ...(firstIds.get(`${company}/${resource}`) ?? []).map(
        (id): Target => ({
          company,
          resource,
          path: `${API_PREFIX}/${resource}/${String(id)}`,
          read: { kind: 'record', id },
        }),
      ),
    ]),
  );
}

function fetchJson(
  agent: Agent,
  base: string,
  path: string,
  authorization: string,
): Promise<{ status: number; body: unknown; cacheStatus: string }> {
  return new Promise((resolve) => {
    const sent = request(new URL(path, base), { agent, headers: { authorization } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = undefined;
        }
        const header = res.headers['cache-status'];
        resolve({ status: res.statusCode ?? 0, body, cacheStatus: typeof header === 'string' ? header : '' });
      });
    });
    sent.on('error', () => resolve({ status: 0, body: undefined, cacheStatus: '' }));
    sent.end();
  });
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
    const companies = SANDBOX_COMPANIES.map(String);
    const tokens = new Map<string, string>();
    for (const company of companies) tokens.set(company, `Bearer ${await mintDevToken({ company, secret })}`);
    const firstIds = new Map<string, number[]>();
    for (const company of companies)
      for (const resource of RESOURCE_NAMES) {
        const page = await fetchJson(
          agent,
          sandbox.url,
          `${API_PREFIX}/${resource}?per_page=3`,
          tokens.get(company) ?? '',
        );
        const data = (page.body as { data?: Array<{ id: number }> } | undefined)?.data ?? [];
        firstIds.set(
          `${company}/${resource}`,
          data.map((record) => record.id),
        );
      }
    const targets = targetsOf(companies, firstIds);
    const webhook = { url: `${proxy.adminUrl}/admin/cache/invalidate`, token: adminToken };
    await sandboxControl(sandbox.url, 'PUT', 'live', {
      preset: 'mixed',
      ...(variant === 'invalidated' && { webhook }),
    });
    const before = await sandboxControl(sandbox.url, 'GET', 'stats');
    const startedAt = Date.now();
    const answers = await read(agent, proxy.url, targets, tokens, settings);
    const after = await sandboxControl(sandbox.url, 'GET', 'stats');
    const feed = new ChangeFeed(async (since) => {
      const listed = await sandboxControl(sandbox.url, 'GET', `changes?since=${String(since)}&limit=1000000`);
      return (listed as { changes: LoggedChange[] }).changes;
    });
    await feed.update();
    const figures = {
      ...judge(answers, feed, settings, before, after),
      pageChangesPerMinute: (pageChanges(targets, feed, startedAt) * 60) / settings.seconds,
      pages: targets.length,
    };
    report(figures, settings, targets.length, variant);
    if (variant === 'invalidated') {
      const live = (await sandboxControl(sandbox.url, 'GET', 'live')) as {
        webhook?: { delivered?: number; dropped?: number };
      };
      say(
        `  webhook: ${fmtInt(live.webhook?.delivered ?? 0)} changes delivered, ${fmtInt(live.webhook?.dropped ?? 0)} dropped`,
      );
    }
    return figures;
  } finally {
    agent.destroy();
    await stop(proxy.launched);
    await stop(sandbox.launched);
  }
}

/** `perSecond` requests a second for `seconds`, open loop, each a Zipf pick of the targets. */
async function read(
  agent: Agent,
  base: string,
  targets: readonly Target[],
  tokens: ReadonlyMap<string, string>,
  settings: FreshnessSettings,
): Promise<Judged[]> {
  const pick = zipfPicker(targets.length);
  // The most read pages spread over the companies and resources: a fixed shuffle of the targets.
  const order = targets
    .map((target, i) => ({ target, key: (i * 2_654_435_761) % 4_294_967_296 }))
    .sort((a, b) => a.key - b.key);
  const answers: Judged[] = [];
  const pending: Promise<void>[] = [];
  const tickMs = 10;
  const end = performance.now() + settings.seconds * 1000;
  let owed = 0;
  while (performance.now() < end) {
    owed += (settings.perSecond * tickMs) / 1000;
    for (; owed >= 1; owed -= 1) {
      const target = order[pick()]?.target;
      if (target === undefined) continue;
      pending.push(
        fetchJson(agent, base, target.path, tokens.get(target.company) ?? '').then(({ status, body, cacheStatus }) => {
          if (status === 200) answers.push({ ...target, servedAt: Date.now(), body, cacheStatus });
        }),
      );
    }
    await new Promise((resolve) => setTimeout(resolve, tickMs));
  }
  await Promise.all(pending);
  return answers;
}

function statsOf(value: unknown): { served: number; notModified: number; responseBytes: number } {
  const stats = value as { served?: number; notModified?: number; responseBytes?: number };
  return { served: stats.served ?? 0, notModified: stats.notModified ?? 0, responseBytes: stats.responseBytes ?? 0 };
}

/** A `Cache-Status` without its numbers: the path an answer took. */
function pathOf(cacheStatus: string): string {
  return cacheStatus.replace(/ttl=-?\d+/, 'ttl').replace(/^slab-proxy; /, '');
}

/** Changes made since `from` that each target could show, summed (`pageChangesPerMinute`). */
function pageChanges(targets: readonly Target[], feed: ChangeFeed, from: number): number {
  let sum = 0;
  for (const target of targets) {
    const changes = feed.of(target.company, target.resource).filter((change) => change.at >= from);
    const { read } = target;
    sum += read.kind === 'list' ? changes.length : changes.filter((change) => change.id === read.id).length;
  }
  return sum;
}

function judge(
  answers: readonly Judged[],
  feed: ChangeFeed,
  settings: FreshnessSettings,
  before: unknown,
  after: unknown,
): Omit<FreshnessFigures, 'pageChangesPerMinute' | 'pages'> {
  const all = new LatencyHistogram();
  const byResource = new Map<string, { histogram: LatencyHistogram; stale: number }>();
  let stale = 0;
  const staleByPath = new Map<string, number>();
  for (const answer of answers) {
    const ms = staleness(answer, feed.of(answer.company, answer.resource));
    all.record(ms);
    let resource = byResource.get(answer.resource);
    if (resource === undefined) {
      resource = { histogram: new LatencyHistogram(), stale: 0 };
      byResource.set(answer.resource, resource);
    }
    resource.histogram.record(ms);
    if (ms > STALE_AFTER_MS) {
      stale += 1;
      const path = pathOf(answer.cacheStatus);
      staleByPath.set(path, (staleByPath.get(path) ?? 0) + 1);
      resource.stale += 1;
    }
  }
  const [b, a] = [statsOf(before), statsOf(after)];
  const perMinute = 60 / settings.seconds;
  return {
    answers: answers.length,
    staleShare: answers.length === 0 ? Number.NaN : stale / answers.length,
    p99Ms: all.percentileMs(99),
    upstreamPerMinute: (a.served - b.served) * perMinute,
    notModifiedPerMinute: (a.notModified - b.notModified) * perMinute,
    upstreamKbPerMinute: ((a.responseBytes - b.responseBytes) * perMinute) / 1024,
    staleByPath,
    byResource: new Map(
      [...byResource].map(([name, r]) => [
        name,
        {
          answers: r.histogram.count,
          stale: r.stale,
          p50Ms: r.histogram.percentileMs(50),
          p99Ms: r.histogram.percentileMs(99),
          maxMs: r.histogram.maxMs,
        },
      ]),
    ),
  };
}

function report(
  figures: FreshnessFigures,
  settings: FreshnessSettings,
  pages: number,
  variant: FreshnessVariant,
): void {
  const how =
    variant === 'fixed' ? 'the shipped TTLs' : 'the shipped TTLs and each change sent to /admin/cache/invalidate';
  say(
    `freshness (${variant}): the live sandbox (mixed: 5% of records change every 3 s, 20% every minute), ${how}, ${String(settings.perSecond)} req/s Zipf over ${String(pages)} pages of 4 companies, ${String(settings.seconds)} s`,
  );
  say(
    `  ${fmtInt(figures.answers)} answers, ${fmt(figures.staleShare * 100, 1)}% stale (a change older than 1 s missing), staleness p99 ${fmt(figures.p99Ms / 1000, 1)} s; upstream ${fmtInt(figures.upstreamPerMinute)} requests/min (${fmtInt(figures.notModifiedPerMinute)} 304s), ${fmtInt(figures.upstreamKbPerMinute)} KB/min`,
  );
  const rows = [...figures.byResource].map(([name, r]) => [
    name,
    fmtInt(r.answers),
    `${fmt((r.stale / r.answers) * 100, 1)}%`,
    fmt(r.p50Ms / 1000, 1),
    fmt(r.p99Ms / 1000, 1),
    fmt(r.maxMs / 1000, 1),
  ]);
  for (const line of textTable(['resource', 'answers', 'stale', 'p50 s', 'p99 s', 'max s'], rows)) say(`  ${line}`);
  say(
    `  the changes could show on pages ${fmtInt(figures.pageChangesPerMinute)} times a minute; with ${fmtInt(figures.pages)} cold misses, the most an invalidated run needs of the upstream`,
  );
  const paths = [...figures.staleByPath].sort((x, y) => y[1] - x[1]).map(([path, n]) => `${path}: ${fmtInt(n)}`);
  if (paths.length > 0) say(`  stale answers by Cache-Status: ${paths.join('; ')}`);
}
