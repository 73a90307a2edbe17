/**
 * Where a cache hit's microseconds go, in process: the data plane's own request flow
 * (`REQUEST_FLOW`, src/planes/data/steps.ts) timed step by step, by name, on the parts of a
 * replica built by the product's own wiring (bench/hit-breakdown/rig.ts: `createProxyApp`, the
 * bench proxies' config, a Redis): its authenticator, whose tokens were verified once (every later
 * hit takes the verified-token cache), its inbound limits shared through Redis (never refusing),
 * its read service with the pages in its L1, its metrics and its request log (the shipped
 * destination, on /dev/null); requests and answers are real `IncomingMessage`/`ServerResponse`
 * objects over a socket never connected (bench/hit-breakdown/traffic.ts).
 *
 * For each step k on a hit's path: batches of exchanges are opened (`openExchange`, as the data
 * plane opens them) and taken through steps 0..k-1 untimed, then step k alone is timed over the
 * batch (bench/hit-breakdown/measure.ts). Each row is the mean µs per call (GC included) and the
 * median of the batch means. The steps' sum is set against the replica's data plane options run by
 * the real `createDataPlane`, end to end on the same parts; the difference is the runner, the state
 * a hit carries hot from one step to the next (a batch of exchanges is colder), and GC between steps.
 *
 * A step added to REQUEST_FLOW is timed without a change here: the rows are the list's. Beside
 * them (bench/hit-breakdown/rows.ts): "of which" details and the in-process limiter under the step
 * they belong to, and what is not paid per hit (an L1 miss, a token's first verification, what a
 * fill does once). The report's form: bench/hit-breakdown/report.ts.
 *
 * Run alone: `REDIS_URL=redis://127.0.0.1:6379 node dist-bench/bench/hit-breakdown.js` (it writes
 * keys under the `benchhb` prefix only). `npm run bench` runs it after the load phases.
 */
import { fileURLToPath } from 'node:url';
import type { Principal } from '../src/auth/principal.js';
import { cacheAddress } from '../src/cache/entry/cache-key.js';
import { DEV_SECRET } from '../src/cli/dev-credentials.js';
import { createDataPlane } from '../src/planes/data/data-plane.js';
import type { Exchange } from '../src/planes/data/exchange.js';
import { REQUEST_FLOW, readThroughCache, type Step } from '../src/planes/data/steps.js';
import type { CanonicalRead } from '../src/request/canonical-read.js';
import { cycle, measure, type Timing, type Workload } from './hit-breakdown/measure.js';
import {
  type BreakdownReport,
  type BreakdownRow,
  EXCHANGE_ROW,
  FLOW_SECTION,
  formatBreakdown,
  type RowKind,
  type StepTiming,
} from './hit-breakdown/report.js';
import { wire } from './hit-breakdown/rig.js';
import { type AloneOptions, type Bench, CONTEXT, detailsOf, notPerHit } from './hit-breakdown/rows.js';
import {
  type BreakdownPage,
  defaultPages,
  type Flow,
  type Fresh,
  filledEntry,
  trafficOf,
} from './hit-breakdown/traffic.js';

export { sink } from './hit-breakdown/measure.js';
export {
  type BreakdownReport,
  type BreakdownRow,
  breakdownResult,
  EXCHANGE_ROW,
  formatBreakdown,
  type RowKind,
  type StepTiming,
} from './hit-breakdown/report.js';
export type { BreakdownPage, Flow } from './hit-breakdown/traffic.js';

export interface BreakdownOptions {
  readonly redisUrl: string;
  /** The HMAC secret that signs the tokens (any 32+ bytes). */
  readonly secret?: string;
  /** Defaults to company 1's movements, walked by keyset from the sandbox's dataset. */
  readonly pages?: readonly BreakdownPage[];
  /** Measured time per row, ms (default 300). */
  readonly msPerStep?: number;
  /** The proxy's measured hit rate, to amortise the L1-miss store path over hits. */
  readonly hitsPerSecond?: number;
  /** The flow whose steps are timed (default REQUEST_FLOW, what the data plane runs). */
  readonly flow?: Flow;
}

export async function runHitBreakdown(options: BreakdownOptions): Promise<BreakdownReport> {
  const ms = options.msPerStep ?? 300;
  const time = <T>(work: Workload<T>): Promise<Timing> => measure(work, ms);
  const secret = options.secret ?? DEV_SECRET;
  const pages = options.pages ?? defaultPages();
  const flow = options.flow ?? REQUEST_FLOW;
  if (pages.length === 0) throw new Error('hit-breakdown: no pages');
  const readAt = flow.findIndex(([, step]) => step === readThroughCache);
  if (readAt < 0) throw new Error('hit-breakdown: the flow reads nothing from the cache');

  const rig = await wire(options.redisUrl, secret);
  const { parts, answers, policies } = rig;
  let traffic: Awaited<ReturnType<typeof trafficOf>> | undefined;
  try {
    traffic = await trafficOf(pages, secret, rig);
    const { through } = traffic;
    // ── each page stored as a fill stores it; each token verified once, by the flow itself ──
    const atRead: Array<{ read: CanonicalRead; principal: Principal }> = [];
    for (const _ of pages) {
      const { read, identity } = await through(flow.slice(0, readAt));
      if (read === undefined || identity === undefined) throw new Error('hit-breakdown: no read before the cache');
      atRead.push({ read, principal: identity.principal });
    }
    const addresses = atRead.map(({ read, principal }) =>
      cacheAddress(rig.keyPrefix, read, principal, policies.policyFor(read.resource.name).partition),
    );
    const now = Date.now();
    for (const [i, address] of addresses.entries()) {
      const generation = await rig.store.ensureGeneration(address);
      if (generation === undefined) throw new Error('hit-breakdown: Redis is not usable');
      await rig.store.save(address, filledEntry(cycle(pages, i).body, now, generation));
    }

    // ── every page once through the real data plane: hits, now in the L1 ──
    const plane = createDataPlane(rig.planeOptions);
    /** A hit answers within the call; only an answer still to come is waited for. */
    const throughPlane = ({ req, res }: Fresh): Promise<void> | undefined => {
      const before = answers.answers;
      plane(req, res);
      return answers.answers > before ? undefined : answers.next();
    };
    const fresh = traffic.fresh;
    for (const _ of pages) await throughPlane(fresh());
    answers.expectOnlyHits('the data plane');

    // ── a hit's path: the steps up to the one that answers it ──
    const probe = traffic.open(fresh());
    let answeredAt = -1;
    for (const [k, [, step]] of flow.entries()) {
      if (await step(probe, parts)) {
        answeredAt = k;
        break;
      }
    }
    answers.expectOnlyHits('a hit');
    if (answeredAt < 0) throw new Error('hit-breakdown: no step answered a hit');
    const path = flow.slice(0, answeredAt + 1);
    const notes: string[] = [];
    const beyond = flow.slice(answeredAt + 1).map(([name]) => name);
    if (beyond.length > 0) notes.push(`steps a hit never reaches (answered before them): ${beyond.join(', ')}`);
    const bench: Bench = {
      rig,
      traffic,
      path,
      addresses,
      atRead,
      time,
      stepAlone(k, { parts: stepParts = parts, batch, newTokens = false }: AloneOptions = {}) {
        const step = path[k]?.[1];
        if (step === undefined) throw new Error(`hit-breakdown: no step ${String(k)}`);
        const before = path.slice(0, k);
        return {
          async prepare(size) {
            const exchanges: Exchange[] = [];
            for (let j = 0; j < size; j++) exchanges.push(await through(before, newTokens));
            return exchanges;
          },
          run: (ex) => step(ex, stepParts),
          ...(batch !== undefined && { batch }),
        };
      },
      onPath(step: Step) {
        const k = path.findIndex(([, s]) => s === step);
        return k < 0 ? undefined : k;
      },
    };
    const freshBatch: Workload<Fresh>['prepare'] = (size) => Array.from({ length: size }, () => fresh());

    const details = detailsOf(bench);
    for (const detail of details) {
      if (bench.onPath(detail.of) === undefined)
        notes.push(`not timed: "${detail.label}", its step (${detail.of.name}) being on no hit's path`);
    }

    const rows: BreakdownRow[] = [];
    const steps: StepTiming[] = [];
    const addRow = (section: string, label: string, kind: RowKind, t: Pick<Timing, 'meanUs' | 'medianUs'>): void => {
      rows.push({ section, label, kind, us: t.meanUs, medianUs: t.medianUs });
    };
    const addStep = (name: string, label: string, t: Timing): void => {
      addRow(FLOW_SECTION, label, 'step', t);
      steps.push({ name, us: t.meanUs, medianUs: t.medianUs });
    };

    // ── per hit: the exchange, then each step alone ──
    addStep(
      EXCHANGE_ROW,
      `${EXCHANGE_ROW} (openExchange: target, route, request id, log path)`,
      await time({ prepare: freshBatch, run: traffic.open }),
    );
    for (const [k, [name, step]] of path.entries()) {
      const answersBefore = answers.answers;
      const timing = await time(bench.stepAlone(k));
      answers.expectOnlyHits(`step "${name}"`);
      if (k < answeredAt && answers.answers !== answersBefore)
        throw new Error(`hit-breakdown: step "${name}" answered a hit before the last step of its path`);
      addStep(name, step.name === '' ? name : `${name} (${step.name})`, timing);
      for (const detail of details) {
        if (detail.of === step) addRow(FLOW_SECTION, detail.label, 'detail', await detail.timing(k));
      }
    }

    // ── end to end: the real data plane; and what the bare server does per request ──
    const endToEnd = await measure({ prepare: freshBatch, run: throughPlane }, ms * 2);
    answers.expectOnlyHits('the data plane');
    const sample = filledEntry(cycle(pages, 0).body, now, 'g');
    const baselineWrite = await time({
      prepare: (size) => Array.from({ length: size }, () => fresh().res),
      run(res) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': sample.body.length });
        res.end(sample.body);
        return res;
      },
    });

    // ── not per hit ──
    const { storeMissCpuUs } = await notPerHit(bench, sample, (label, t) => addRow(CONTEXT, label, 'context', t));

    // The L1 keeps a copy for l1.ttl: each process reads each key from Redis once per ttl.
    const l1TtlSeconds = rig.l1TtlSeconds;
    const storeMissAmortisedUs =
      options.hitsPerSecond !== undefined && options.hitsPerSecond > 0 && storeMissCpuUs !== undefined
        ? (storeMissCpuUs * Math.min(pages.length / l1TtlSeconds, options.hitsPerSecond)) / options.hitsPerSecond
        : undefined;

    const TOTALS = 'totals';
    const stepSumUs = steps.reduce((sum, s) => sum + s.us, 0);
    addRow(TOTALS, 'Σ steps', 'total', { meanUs: stepSumUs, medianUs: steps.reduce((sum, s) => sum + s.medianUs, 0) });
    addRow(TOTALS, 'data plane end to end (real createDataPlane, fake socket)', 'total', endToEnd);
    addRow(TOTALS, 'unaccounted (the runner, state kept hot between steps, GC)', 'total', {
      meanUs: endToEnd.meanUs - stepSumUs,
      medianUs: 0,
    });
    addRow(TOTALS, "the baseline's own write (2 headers + body)", 'total', baselineWrite);
    addRow(TOTALS, 'a hit beyond the bare server (end to end − baseline write)', 'total', {
      meanUs: endToEnd.meanUs - baselineWrite.meanUs,
      medianUs: endToEnd.medianUs - baselineWrite.medianUs,
    });

    return {
      rows,
      steps,
      stepSumUs,
      dataPlaneUs: endToEnd.meanUs,
      baselineWriteUs: baselineWrite.meanUs,
      extraOverBaselineUs: endToEnd.meanUs - baselineWrite.meanUs,
      storeMissAmortisedUs,
      notes,
    };
  } finally {
    traffic?.close();
    await rig.close();
  }
}

/** `node dist-bench/bench/hit-breakdown.js` with REDIS_URL (and optionally JWT_SECRET). */
async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  if (redisUrl === undefined || redisUrl === '') {
    process.stderr.write('hit-breakdown: set REDIS_URL (keys are written under the benchhb prefix only)\n');
    process.exit(2);
  }
  const secret = process.env.JWT_SECRET;
  const report = await runHitBreakdown({ redisUrl, ...(secret !== undefined && secret !== '' && { secret }) });
  process.stdout.write(`where a hit's microseconds go (in-process, this machine)\n${formatBreakdown(report)}\n`);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    process.stderr.write(`hit-breakdown: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
