/**
 * Freshness (docs/benchmarks.md): the live sandbox changes its records by the `mixed`
 * workload (docs/sandbox.md#live-mode) while readers of four companies read a Zipf mix of list and
 * record pages through a proxy with the shipped TTLs; every answer is judged against the change log
 * (bench/lib/freshness.ts). Reported: the share of stale answers (a change older than 1 s missing),
 * staleness by resource, and what the upstream served per minute. The yardstick for lifetimes and
 * invalidations other than fixed TTLs: measured, not judged, here.
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
}

/** A page a reader asks for: its target and what it reads. */
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
): Promise<{ status: number; body: unknown }> {
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
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    sent.on('error', () => resolve({ status: 0, body: undefined }));
    sent.end();
  });
}

export async function runFreshness(
  settings: FreshnessSettings,
  nodeFlags: readonly string[],
): Promise<FreshnessFigures> {
  const dir = scratchDir('slab-freshness-');
  const secret = randomBytes(48).toString('base64url');
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const proxy = await startProxy({
    name: 'proxy (freshness)',
    upstreamUrl: sandbox.url,
    secret,
    configFile: writeConfig(dir),
    logLevel: 'info',
    cpu: SERVER_CPU,
    nodeFlags,
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
    await sandboxControl(sandbox.url, 'PUT', 'live', { preset: 'mixed' });
    const before = await sandboxControl(sandbox.url, 'GET', 'stats');
    const answers = await read(agent, proxy.url, targets, tokens, settings);
    const after = await sandboxControl(sandbox.url, 'GET', 'stats');
    const feed = new ChangeFeed(async (since) => {
      const listed = await sandboxControl(sandbox.url, 'GET', `changes?since=${String(since)}&limit=1000000`);
      return (listed as { changes: LoggedChange[] }).changes;
    });
    await feed.update();
    const figures = judge(answers, feed, settings, before, after);
    report(figures, settings, targets.length);
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
): Promise<Answered[]> {
  const pick = zipfPicker(targets.length);
  // The most read pages spread over the companies and resources: a fixed shuffle of the targets.
  const order = targets
    .map((target, i) => ({ target, key: (i * 2_654_435_761) % 4_294_967_296 }))
    .sort((a, b) => a.key - b.key);
  const answers: Answered[] = [];
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
        fetchJson(agent, base, target.path, tokens.get(target.company) ?? '').then(({ status, body }) => {
          if (status === 200) answers.push({ ...target, servedAt: Date.now(), body });
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

function judge(
  answers: readonly Answered[],
  feed: ChangeFeed,
  settings: FreshnessSettings,
  before: unknown,
  after: unknown,
): FreshnessFigures {
  const all = new LatencyHistogram();
  const byResource = new Map<string, { histogram: LatencyHistogram; stale: number }>();
  let stale = 0;
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

function report(figures: FreshnessFigures, settings: FreshnessSettings, pages: number): void {
  say(
    `freshness: the live sandbox (mixed: 5% of records change every 3 s, 20% every minute), the shipped TTLs, ${String(settings.perSecond)} req/s Zipf over ${String(pages)} pages of 4 companies, ${String(settings.seconds)} s`,
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
}
