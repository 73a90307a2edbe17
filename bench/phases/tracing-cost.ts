/**
 * What tracing costs on the hit path (docs/operations.md#tracing): the real data plane (`createDataPlane`,
 * the real authenticator, limits, read service and answer writer; the request log to /dev/null as
 * shipped) serving cache hits from the in-process store, in this process, with fake sockets, in
 * interleaved rounds of:
 *
 *   off                 no tracing configured (what ships unless OTEL_EXPORTER_OTLP_ENDPOINT is set)
 *   off, again          the same data plane measured a second time: the method's own noise, the
 *                       smallest difference these figures can show
 *   before tracing      with TRACING_COST_BASELINE only: another build's data plane (below)
 *   off, client traceparent   tracing off, the client sending `traceparent` and `tracestate`
 *   on, not sampled     tracing configured, the sampler saying no (OTEL_TRACES_SAMPLER=always_off)
 *   on, sampled         every request recorded, batched to an exporter that discards them (the
 *                       work of the OTLP export's HTTP requests is not counted)
 *   on, sampled, client traceparent   the same, the client sending `traceparent` and `tracestate`
 *
 * A hit whose token was verified lately is answered without leaving the call, so each request is
 * one synchronous call of the data plane; batches of them are timed with `process.hrtime.bigint()`
 * (GC included), the event loop turning between batches (the batch processor exports there).
 * Reported: the median over rounds of each variant's µs per hit, and the difference from `off`.
 *
 * With TRACING_COST_BASELINE set to another build's `dist/` (the commit before tracing, built with
 * `npm run build`), that build's data plane runs beside this one's in the same rounds, each with
 * its own modules and components: the before/after of tracing off.
 *
 * Run alone: `npm run build && npx tsc -p tsconfig.bench.json && node dist-bench/bench/phases/tracing-cost.js`
 * (TRACING_COST_ROUNDS, default 7; TRACING_COST_MS per variant and round, default 400). It needs
 * nothing but Node: no Redis, no upstream.
 */
import { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { pino } from 'pino';
import { DEV_SECRET, mintDevToken } from '../../src/cli/dev-credentials.js';
import type { RequestLog } from '../../src/observability/logger.js';
import type { Tracing } from '../../src/observability/tracing.js';
import { startTracing, type TracesSampler } from '../../src/observability/tracing-sdk.js';
import type { DataPlane } from '../../src/planes/data/data-plane.js';
import { generateDataset } from '../../src/sandbox/dataset.js';
import { fmt, spread, textTable } from '../lib/format.js';
import { makeRequest } from '../lib/parsed-request.js';
import { median } from '../lib/stats.js';

/**
 * The modules a hit goes through, loaded from a build's root: this one's, or another commit's
 * `dist/` (TRACING_COST_BASELINE), so that both data planes run side by side in one process.
 */
async function loadBuild(root: string) {
  const at = (path: string): string => new URL(path, root).href;
  return {
    accessLists: (await import(at('auth/access-lists.js'))) as typeof import('../../src/auth/access-lists.js'),
    authenticate: (await import(at('auth/authenticate.js'))) as typeof import('../../src/auth/authenticate.js'),
    authorize: (await import(at('auth/authorize.js'))) as typeof import('../../src/auth/authorize.js'),
    claims: (await import(at('auth/claims.js'))) as typeof import('../../src/auth/claims.js'),
    verifyToken: (await import(at('auth/verify-token.js'))) as typeof import('../../src/auth/verify-token.js'),
    cacheKey: (await import(at('cache/cache-key.js'))) as typeof import('../../src/cache/entry/cache-key.js'),
    coordinator: (await import(at('cache/coordinator.js'))) as typeof import('../../src/cache/read/coordinator.js'),
    entry: (await import(at('cache/entry.js'))) as typeof import('../../src/cache/entry/entry.js'),
    memoryStore: (await import(at('cache/memory-store.js'))) as typeof import('../../src/cache/stores/memory-store.js'),
    policy: (await import(at('cache/policy.js'))) as typeof import('../../src/cache/read/policy.js'),
    readService: (await import(at('cache/read-service.js'))) as typeof import('../../src/cache/read/read-service.js'),
    resources: (await import(at('catalog/resources.js'))) as typeof import('../../src/catalog/resources.js'),
    schema: (await import(at('config/schema.js'))) as typeof import('../../src/config/schema.js'),
    errors: (await import(at('errors/proxy-error.js'))) as typeof import('../../src/errors/proxy-error.js'),
    inbound: (await import(at('limits/inbound.js'))) as typeof import('../../src/limits/inbound.js'),
    logger: (await import(at('observability/logger.js'))) as typeof import('../../src/observability/logger.js'),
    dataPlane: (await import(at('planes/data/data-plane.js'))) as typeof import('../../src/planes/data/data-plane.js'),
    canonical: (await import(at('request/canonical-read.js'))) as typeof import('../../src/request/canonical-read.js'),
    query: (await import(at('request/query.js'))) as typeof import('../../src/request/query.js'),
    route: (await import(at('request/route.js'))) as typeof import('../../src/request/route.js'),
    target: (await import(at('request/target.js'))) as typeof import('../../src/request/target.js'),
  };
}
type Build = Awaited<ReturnType<typeof loadBuild>>;

/** This build's modules (the same instances as the static imports above). */
const THIS_BUILD = new URL('../../src/', import.meta.url).href;

export interface TracingCostOptions {
  readonly rounds?: number;
  /** Another build's `dist/` (a file URL ending in `/`): its data plane is measured beside this one's. */
  readonly baselineRoot?: string;
  /** Measured time per variant and round, ms. */
  readonly msPerVariant?: number;
}

export interface TracingCostRow {
  readonly variant: string;
  /** Median over rounds of the mean µs per hit. */
  readonly usPerHit: number;
  /** Each round's mean µs per hit. */
  readonly rounds: readonly number[];
  /** usPerHit − off's. */
  readonly overOffUs: number;
  /** Spans exported per request (tracing on): 1 when sampled and none was dropped, 0 when not sampled. */
  readonly spansPerRequest: number | undefined;
}

export interface TracingCostReport {
  readonly rows: readonly TracingCostRow[];
  /** |off, again − off|: differences below this are not measurable by this method. */
  readonly noiseUs: number;
}

const BATCH = 256;
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

/** Results are written here so that the compiler cannot drop the work being measured. */
export let sink: unknown;

/** An exporter that counts and drops: the SDK's work without the network's. */
class DiscardingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface Variant {
  readonly name: string;
  readonly plane: DataPlane;
  readonly headers: readonly string[];
  readonly exporter: DiscardingExporter | undefined;
  readonly shutdown: () => Promise<void>;
  requests: number;
  readonly means: number[];
}

/** Hits from one build's data plane: its own components, ten pages stored in its in-process store. */
async function hitPlanes(build: Build, bearer: string, log: RequestLog) {
  const { errors } = build;
  // ── the real components, as src/app.ts wires them for the in-process store ──
  const verifier = build.verifyToken.createTokenVerifier({
    keys: { kind: 'secret', secret: DEV_SECRET },
    clockToleranceSeconds: 30,
    claims: build.claims.DEFAULT_CLAIM_NAMES,
  });
  const lists = build.accessLists.NO_ACCESS_LISTS;
  const authenticator = build.authenticate.createAuthenticator(verifier, lists);
  const config = build.schema.BUILT_IN_CONFIG.cache;
  // Pages stay fresh for the whole run (the built-in 10 s of `movements` would turn hits stale).
  const policies = new build.policy.CachePolicies({
    ...config,
    resources: { ...config.resources, movements: { ttl: 3_600 } },
  });
  const store = build.memoryStore.createMemoryStore({ maxBytes: config.memory.maxBytes });
  const reads = build.readService.createReadService({
    store,
    l1: undefined,
    coordinator: build.coordinator.LOCAL_COORDINATOR,
    policies,
    keyPrefix: 'slab',
    fetch: () => Promise.reject(new Error('tracing-cost: a hit must not reach the upstream')),
    coalesceWaitMs: 1_000,
  });
  const never = { points: 1_000_000_000, duration: 60 };
  const limiter = build.inbound.createInboundLimiter({ perCredential: never, perCompany: never, replicas: 1 });

  // ── ten pages of company 1's movements, stored as a fill would store them ──
  const identity = await authenticator.authenticate([`Bearer ${bearer}`]);
  if (identity instanceof errors.ProxyError) throw new Error(`tracing-cost: token refused: ${identity.code}`);
  const records = (generateDataset().get('movements') ?? []).filter((r) => String(r.company_id) === '1');
  const paths: string[] = [];
  const now = Date.now();
  for (let page = 0; page < 10; page++) {
    const data = records.slice(page * 30, page * 30 + 30);
    const after = page === 0 ? undefined : records[page * 30 - 1]?.id;
    const path = `${build.resources.API_PREFIX}/movements?${after === undefined ? '' : `after_id=${after}&`}per_page=30`;
    const body = Buffer.from(JSON.stringify({ data, meta: { per_page: 30, has_more: true, next_after_id: 0 } }));
    const target = build.target.classifyTarget(path);
    if (target.kind !== 'api') throw new Error(`tracing-cost: ${path} is not an API path`);
    const route = build.route.resolveRoute(target.path);
    if (route.kind !== 'list') throw new Error(`tracing-cost: ${path} names no list`);
    const read = build.canonical.buildCanonicalRead(route, build.query.parseRawQuery(target.rawQuery));
    if (read instanceof errors.ProxyError) throw new Error(`tracing-cost: ${path}: ${read.message}`);
    const address = build.cacheKey.cacheAddress('slab', read, identity.principal, 'company');
    const generation = await store.ensureGeneration(address);
    await store.save(address, {
      status: 200,
      contentType: 'application/json',
      etag: build.entry.strongEtag(body),
      body,
      storedAt: now,
      freshUntil: now + 3_600_000,
      keepUntil: now + 3_700_000,
      generation: generation ?? '',
    });
    paths.push(path);
  }
  return {
    paths,
    planeWith: (tracing: Tracing | undefined): DataPlane =>
      build.dataPlane.createDataPlane({
        authenticator,
        limiter,
        lists,
        policy: build.authorize.DEFAULT_AUTHORIZATION_POLICY,
        reads,
        log,
        yieldUnknownResources: false,
        ...(tracing !== undefined && { tracing }),
      }),
    close: () => verifier.close(),
  };
}

export async function runTracingCost(options: TracingCostOptions = {}): Promise<TracingCostReport> {
  const rounds = options.rounds ?? 7;
  const ms = options.msPerVariant ?? 400;
  const build = await loadBuild(THIS_BUILD);
  const requestLog = build.logger.createRequestLog(
    build.logger.createLogger('info', pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 })),
  );
  let answered = 0;
  let notHits = 0;
  const log: RequestLog = (fields) => {
    requestLog(fields);
    answered += 1;
    if (fields.status !== 200 || fields.cache !== 'hit') notHits += 1;
  };
  const bearer = await mintDevToken({ company: 1 });
  const current = await hitPlanes(build, bearer, log);
  const baseline =
    options.baselineRoot === undefined
      ? undefined
      : await hitPlanes(await loadBuild(options.baselineRoot), bearer, log);
  const paths = current.paths;
  const planeWith = current.planeWith;
  const plain = ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${bearer}`];
  const withParent = [...plain, 'traceparent', `00-${TRACE}-${PARENT}-01`, 'tracestate', 'rojo=00f067aa0ba902b7'];
  const variant = (
    name: string,
    plane: DataPlane,
    headers: readonly string[],
    traced?: { exporter: DiscardingExporter; shutdown: () => Promise<void> },
  ): Variant => ({
    name,
    plane,
    headers,
    exporter: traced?.exporter,
    shutdown: traced?.shutdown ?? (() => Promise.resolve()),
    requests: 0,
    means: [],
  });
  const traced = async (name: string, sampler: TracesSampler, headers: readonly string[]): Promise<Variant> => {
    const exporter = new DiscardingExporter();
    const sdk = await import('@opentelemetry/sdk-trace');
    const runtime = await startTracing({
      serviceName: 'slab-ops-proxy',
      sampler,
      samplerRatio: 1,
      spanProcessors: [new sdk.BatchSpanProcessor({ exporter })],
    });
    return variant(name, planeWith(runtime.tracing), headers, { exporter, shutdown: () => runtime.shutdown() });
  };
  const variants: Variant[] = [
    variant('off', planeWith(undefined), plain),
    variant('off, again (the noise)', planeWith(undefined), plain),
    ...(baseline === undefined
      ? []
      : [variant('before tracing (TRACING_COST_BASELINE)', baseline.planeWith(undefined), plain)]),
    variant('off, client traceparent', planeWith(undefined), withParent),
    await traced('on, not sampled', 'always_off', plain),
    await traced('on, sampled', 'parentbased_always_on', plain),
    await traced('on, sampled, client traceparent', 'parentbased_always_on', withParent),
  ];

  const socket = new Socket();
  let i = 0;
  const batch = (variant: Variant): bigint => {
    const started = process.hrtime.bigint();
    for (let j = 0; j < BATCH; j++, i++) {
      const req = makeRequest(socket, paths[i % paths.length] ?? '', variant.headers);
      const res = new ServerResponse(req);
      variant.plane(req, res);
      sink = res;
    }
    variant.requests += BATCH;
    return process.hrtime.bigint() - started;
  };
  const measure = async (variant: Variant, forMs: number): Promise<number> => {
    const budget = BigInt(Math.round(forMs * 1e6));
    let total = 0n;
    let calls = 0;
    while (total < budget) {
      total += batch(variant);
      calls += BATCH;
      await turn();
    }
    return Number(total) / 1e3 / calls;
  };

  // Every variant answers hits, synchronously, before anything is measured.
  for (const variant of variants) {
    const before = answered;
    batch(variant);
    if (answered - before !== BATCH || notHits > 0)
      throw new Error(`tracing-cost: ${variant.name} did not answer every request as a hit`);
  }
  for (const variant of variants) await measure(variant, 150);
  for (let round = 0; round < rounds; round++) {
    // Each variant takes every position in turn: drift over the run does not favour one.
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(round + k) % variants.length] as Variant;
      variant.means.push(await measure(variant, ms));
      if (notHits > 0) throw new Error(`tracing-cost: ${notHits} answers of ${variant.name} were not hits`);
    }
  }
  for (const variant of variants) await variant.shutdown();
  current.close();
  baseline?.close();

  const off = median(variants[0]?.means ?? []);
  const rows = variants.map((variant) => {
    const usPerHit = median(variant.means);
    return {
      variant: variant.name,
      usPerHit,
      rounds: variant.means,
      overOffUs: usPerHit - off,
      spansPerRequest: variant.exporter === undefined ? undefined : variant.exporter.exported / variant.requests,
    };
  });
  return { rows, noiseUs: Math.abs(rows[1]?.overOffUs ?? Number.NaN) };
}

export function formatTracingCost(report: TracingCostReport): string {
  const table = textTable(
    ['variant', 'µs/hit (median)', 'rounds (low–high)', 'vs off', 'spans/request'],
    report.rows.map((row) => [
      row.variant,
      fmt(row.usPerHit, 2),
      spread(row.rounds, 2),
      `${row.overOffUs >= 0 ? '+' : ''}${fmt(row.overOffUs, 2)}`,
      row.spansPerRequest === undefined ? '' : fmt(row.spansPerRequest, 3),
    ]),
  );
  return [...table, `  the method's resolution (|off, again − off|): ${fmt(report.noiseUs, 2)} µs`].join('\n');
}

async function main(): Promise<void> {
  const rounds = Number(process.env.TRACING_COST_ROUNDS ?? '7');
  const msPerVariant = Number(process.env.TRACING_COST_MS ?? '400');
  const baseline = process.env.TRACING_COST_BASELINE;
  const report = await runTracingCost({
    rounds,
    msPerVariant,
    ...(baseline !== undefined &&
      baseline !== '' && { baselineRoot: pathToFileURL(`${baseline.replace(/\/+$/, '')}/`).href }),
  });
  process.stdout.write(
    `what tracing costs a cache hit (in-process data plane, in-process store, ${rounds} rounds × ${msPerVariant} ms per variant)\n${formatTracingCost(report)}\n`,
  );
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((error: unknown) => {
    process.stderr.write(`tracing-cost: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
