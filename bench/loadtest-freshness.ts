/**
 * The load test's freshness phase (docs/load-test.md#freshness): the bench's freshness yardstick
 * (bench/phases/freshness.ts) on the load test's topology. The sandbox runs live with each workload
 * in turn (bench/lib/workloads.ts: `mixed`, `append`, `move`; LOADTEST_FRESHNESS_WORKLOADS) while
 * readers of its four companies read a Zipf mix of the workload's pages through the balancer,
 * spread evenly over the replicas, which share one Redis or a Redis Cluster; every answer is judged
 * against the sandbox's change log (bench/lib/freshness.ts). Two variants a workload, each from a
 * cold cache (every company purged) and a fresh live start: `fixed`, the replicas' TTLs alone;
 * `invalidated`, the sandbox also sending each change to the first replica's
 * `/admin/cache/invalidate` alone — the others hear of it through Redis
 * (docs/cache.md#soft-invalidation), which the staleness of each replica's answers shows — with
 * every TTL raised to a safety net's for the run (bench/lib/fed-lifetimes.ts). Before each workload
 * but `mixed`, a `still` run reads its pages with nothing changing: the yardstick of their latency.
 *
 * As a program (`node dist-bench/bench/loadtest-freshness.js`, e.g. in the docker-compose `loadgen`
 * image) against a running topology: TARGET_URL (the balancer), ADMIN_URLS (every replica's admin
 * port, the first taking the webhook, in the sandbox's reach), SANDBOX_URL (SANDBOX_CONTROL on),
 * JWT_SECRET, ADMIN_TOKEN (the replicas'), INVALIDATE_TOKEN (the replicas', the webhook's; else
 * ADMIN_TOKEN), LOADTEST_FRESHNESS_SECONDS, LOADTEST_FRESHNESS_RATE,
 * LOADTEST_FRESHNESS_WORKLOADS.
 */
import { Agent } from 'node:http';
import { fileURLToPath } from 'node:url';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { envInt, envText } from './lib/env.js';
import { awaitLifetimes, dropFedLifetimes, FED_TTL, raiseFedLifetimes } from './lib/fed-lifetimes.js';
import { fmtInt, say } from './lib/format.js';
import {
  type FreshnessFigures,
  figureLines,
  type GroupFreshness,
  groupStaleness,
  judge,
  scoreAnswers,
  stalenessTable,
} from './lib/freshness-figures.js';
import { type Judged, type ReadPace, readOpenLoop, sandboxFeed, webhookCounts } from './lib/freshness-run.js';
import { sandboxControl } from './lib/http.js';
import { runProgram } from './lib/processes.js';
import {
  type FreshnessWorkload,
  isFreshnessWorkload,
  type PreparedWorkload,
  prepareWorkload,
} from './lib/workloads.js';

/**
 * How the replicas learn of changes in a run: their TTLs alone, or the sandbox's webhook too;
 * `still`: nothing changes.
 */
export type FreshnessVariant = 'fixed' | 'invalidated' | 'still';
const FRESHNESS_VARIANTS = ['fixed', 'invalidated'] as const satisfies readonly FreshnessVariant[];

/** The running topology the phase reads through, and what it may ask of it. */
export interface FreshnessTopology {
  readonly balancerUrl: string;
  /** Every replica's admin URL, `proxy1` first: it takes the webhook (as the sandbox reaches it). */
  readonly adminUrls: readonly string[];
  readonly sandboxUrl: string;
  readonly secret: string;
  /** The replicas' ADMIN_TOKEN: the purges' and the TTL overrides'. */
  readonly adminToken: string;
  /** The replicas' INVALIDATE_TOKEN, the webhook's (docs/operations.md#the-change-feed); ADMIN_TOKEN without one. */
  readonly feedToken?: string | undefined;
}

export interface LoadtestFreshnessRun extends FreshnessFigures {
  readonly workload: FreshnessWorkload;
  readonly variant: FreshnessVariant;
  /** Staleness by the replica that answered (`proxy1`, …). */
  readonly byReplica: Readonly<Record<string, GroupFreshness>>;
  /** The invalidated run's: changes the sandbox's webhook delivered, and those it gave up on. */
  readonly webhook?: { readonly delivered: number; readonly dropped: number };
}

export interface LoadtestFreshness {
  readonly seconds: number;
  readonly perSecond: number;
  readonly replicas: number;
  /** The replica the webhook goes to. */
  readonly webhookReplica: string;
  readonly runs: readonly LoadtestFreshnessRun[];
}

/** Connections per replica: each reader's connection stays on the replica the balancer gave it. */
const CONNECTIONS_PER_REPLICA = 4;

const replicaName = (i: number): string => `proxy${String(i + 1)}`;

/**
 * Each replica by its request ids: a replica's `X-Request-Id`s share a random part drawn at its
 * start, their first 24 characters (src/http/request-id.ts). A 404 of its admin port carries one
 * and asks nothing of the cache.
 */
async function replicaIds(adminUrls: readonly string[]): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const [i, adminUrl] of adminUrls.entries()) {
    const response = await fetch(`${adminUrl}/__which-replica`);
    await response.arrayBuffer();
    const id = response.headers.get('x-request-id') ?? '';
    if (id.length < 24) throw new Error(`${replicaName(i)}: no request id in its answers`);
    ids.set(id.slice(0, 24), replicaName(i));
  }
  return ids;
}

/** Every company's entries a miss on every replica (`POST /admin/cache/purge`): a cold start. */
async function purgeCompanies(adminUrl: string, adminToken: string): Promise<void> {
  for (const company of SANDBOX_COMPANIES) {
    const response = await fetch(`${adminUrl}/admin/cache/purge`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ company_id: company }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`purge of company ${String(company)}: ${String(response.status)} ${text}`);
  }
}

interface Phase {
  readonly topology: FreshnessTopology;
  readonly pace: ReadPace;
  readonly replicaOf: (answer: Judged) => string;
}

async function runVariant(
  phase: Phase,
  workload: FreshnessWorkload,
  prepared: PreparedWorkload,
  variant: FreshnessVariant,
): Promise<LoadtestFreshnessRun> {
  const { topology, pace } = phase;
  const { readers } = prepared;
  const [webhookAdmin = ''] = topology.adminUrls;
  if (variant === 'invalidated') {
    await raiseFedLifetimes(webhookAdmin, topology.adminToken);
    await awaitLifetimes(topology.adminUrls, topology.adminToken, FED_TTL);
  }
  await purgeCompanies(webhookAdmin, topology.adminToken);
  const webhook = { url: `${webhookAdmin}/admin/cache/invalidate`, token: topology.feedToken ?? topology.adminToken };
  if (variant !== 'still')
    await sandboxControl(topology.sandboxUrl, 'PUT', 'live', {
      ...prepared.live,
      webhook: variant === 'invalidated' ? webhook : null,
    });
  const agents = Array.from(
    { length: CONNECTIONS_PER_REPLICA * topology.adminUrls.length },
    () => new Agent({ keepAlive: true, maxSockets: 1 }),
  );
  try {
    const before = await sandboxControl(topology.sandboxUrl, 'GET', 'stats');
    const startedAt = Date.now();
    const answers = await readOpenLoop(agents, topology.balancerUrl, readers, pace);
    const after = await sandboxControl(topology.sandboxUrl, 'GET', 'stats');
    const counts = variant === 'invalidated' ? await webhookCounts(topology.sandboxUrl) : undefined;
    if (variant !== 'still') await sandboxControl(topology.sandboxUrl, 'DELETE', 'live');
    const feed = await sandboxFeed(topology.sandboxUrl);
    const scored = scoreAnswers(answers, feed);
    const figures = judge({ scored, feed, targets: readers.targets, startedAt, seconds: pace.seconds, before, after });
    return {
      workload,
      variant,
      ...figures,
      // By name (proxy1, proxy2, …), as the topology lists them.
      byReplica: Object.fromEntries(
        Object.entries(groupStaleness(scored, phase.replicaOf)).sort(([x], [y]) =>
          x.localeCompare(y, 'en', { numeric: true }),
        ),
      ),
      ...(counts !== undefined && { webhook: counts }),
    };
  } finally {
    for (const agent of agents) agent.destroy();
    if (variant === 'invalidated') {
      await dropFedLifetimes(webhookAdmin, topology.adminToken);
      await awaitLifetimes(topology.adminUrls, topology.adminToken, undefined);
    }
  }
}

const WHAT: Readonly<Record<FreshnessWorkload, string>> = {
  mixed: 'mixed: 5% of records change every 3 s, 20% every minute',
  pages: 'pages: 5% of the pages read change every 3 s, 20% every minute',
  append: "append: a new movement every 300 ms in each company, every page of the movements' lists read",
  move: "move: 5% of the movements change item_type every 10 s, every page of the movements' lists read",
};

function printRun(run: LoadtestFreshnessRun, freshness: Omit<LoadtestFreshness, 'runs'>, topologyText: string): void {
  const how =
    run.variant === 'fixed'
      ? 'the TTLs alone'
      : run.variant === 'still'
        ? 'nothing changing'
        : `each change sent to ${freshness.webhookReplica}'s /admin/cache/invalidate, every TTL raised to ${String(FED_TTL)} s`;
  say(
    `freshness (${run.workload}, ${run.variant}): the live sandbox (${WHAT[run.workload]}), ${how}; ${topologyText}; ${String(freshness.perSecond)} req/s Zipf over ${String(run.pages)} pages of 4 companies through the balancer, ${String(freshness.seconds)} s`,
  );
  for (const line of figureLines(run)) say(line);
  for (const line of stalenessTable('replica', run.byReplica)) say(`  ${line}`);
  if (run.webhook !== undefined)
    say(
      `  webhook (to ${freshness.webhookReplica} alone): ${fmtInt(run.webhook.delivered)} changes delivered, ${fmtInt(run.webhook.dropped)} dropped`,
    );
}

/**
 * The runs of one workload: its pages first read with nothing changing, the yardstick of their
 * latency (the log grows in every run of `mixed` and `append`, so each workload's pages are walked,
 * and measured still, anew); `mixed`, the sandbox's own feed, without.
 */
function variantsOf(workload: FreshnessWorkload): FreshnessVariant[] {
  return [...(workload === 'mixed' ? [] : (['still'] as const)), ...FRESHNESS_VARIANTS];
}

/**
 * Each workload's variants in turn on the running topology, printed as they end. `topologyText`
 * says what the replicas share (e.g. "3 replicas sharing one Redis"). The sandbox is left with
 * live mode off.
 */
export async function runLoadtestFreshness(
  topology: FreshnessTopology,
  pace: FreshnessPace,
  topologyText: string,
): Promise<LoadtestFreshness> {
  const ids = await replicaIds(topology.adminUrls);
  const phase: Phase = {
    topology,
    pace,
    replicaOf: (answer) => ids.get(answer.requestId.slice(0, 24)) ?? 'another process',
  };
  const freshness = {
    seconds: pace.seconds,
    perSecond: pace.perSecond,
    replicas: topology.adminUrls.length,
    webhookReplica: replicaName(0),
  };
  const runs: LoadtestFreshnessRun[] = [];
  for (const workload of pace.workloads) {
    const setup = new Agent({ keepAlive: true, maxSockets: 8 });
    const prepared = await prepareWorkload(workload, setup, topology.sandboxUrl, topology.secret).finally(() =>
      setup.destroy(),
    );
    for (const variant of variantsOf(workload)) {
      const run = await runVariant(phase, workload, prepared, variant);
      printRun(run, freshness, topologyText);
      say();
      runs.push(run);
    }
  }
  return { ...freshness, runs };
}

/** The phase's pace, and the workloads it runs in turn. */
export interface FreshnessPace extends ReadPace {
  readonly workloads: readonly FreshnessWorkload[];
}

/**
 * LOADTEST_FRESHNESS_SECONDS (20 a variant; 0: no phase), LOADTEST_FRESHNESS_RATE (200 req/s) and
 * LOADTEST_FRESHNESS_WORKLOADS (`mixed,append,move`).
 */
export function freshnessPace(): FreshnessPace | undefined {
  const seconds = envInt('LOADTEST_FRESHNESS_SECONDS', 20, 0, 3_600);
  if (seconds === 0) return undefined;
  const names = (envText('LOADTEST_FRESHNESS_WORKLOADS') ?? 'mixed,append,move').split(',').map((w) => w.trim());
  const workloads = names.filter(isFreshnessWorkload);
  if (workloads.length === 0 || workloads.length !== names.length)
    throw new TypeError('LOADTEST_FRESHNESS_WORKLOADS: mixed, pages, append or move, comma-separated');
  return { seconds, perSecond: envInt('LOADTEST_FRESHNESS_RATE', 200, 1, 5_000), workloads };
}

async function main(): Promise<number> {
  const required = (name: string): string => {
    const value = envText(name);
    if (value === undefined) throw new TypeError(`${name} is required`);
    return value;
  };
  const adminUrls = required('ADMIN_URLS')
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
  const topology: FreshnessTopology = {
    balancerUrl: required('TARGET_URL'),
    adminUrls,
    sandboxUrl: required('SANDBOX_URL'),
    secret: required('JWT_SECRET'),
    adminToken: required('ADMIN_TOKEN'),
    feedToken: envText('INVALIDATE_TOKEN'),
  };
  const pace = freshnessPace();
  if (pace === undefined) return 0;
  const freshness = await runLoadtestFreshness(topology, pace, `${String(adminUrls.length)} replicas`);
  say(`LOADTEST_FRESHNESS ${JSON.stringify(freshness)}`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) runProgram('loadtest-freshness', main);
