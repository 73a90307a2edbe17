/**
 * Where a cache hit's microseconds go, in process: the data plane's own request flow
 * (`REQUEST_FLOW`, src/planes/data/steps.ts) timed step by step, by name, on the real parts wired
 * as src/app.ts wires them: an authenticator whose tokens were verified once (every later hit
 * takes the verified-token cache) over the operator state's access lists, the inbound limits
 * shared through Redis (never refusing), the read service with the pages in its L1, the metrics,
 * and the request log (the shipped destination: a turn's lines in one write, 4 KiB buffered, on
 * /dev/null); requests and answers are real `IncomingMessage`/`ServerResponse` objects over a
 * socket never connected.
 *
 * For each step k on a hit's path: batches of exchanges are opened (`openExchange`, as the data
 * plane opens them) and taken through steps 0..k-1 untimed, then step k alone is timed over the
 * batch with `process.hrtime.bigint()`, its promise awaited only when it returns one (as
 * `runSteps` does). The event loop turns between batches, so that pino's destination and ioredis
 * run as they do in the server. Each row is the mean µs per call (GC included) and the median of
 * the batch means. The steps' sum is set against the real `createDataPlane`, end to end on the
 * same parts; the difference is the runner, the state a hit carries hot from one step to the
 * next (a batch of exchanges is colder), and GC between steps.
 *
 * node:http builds its header objects lazily, where they are first read (`req.headers` for the
 * request id, as the exchange opens; `headersDistinct` in authenticate), as in the server.
 *
 * A step added to REQUEST_FLOW is timed without a change here: the rows are the list's. Beside
 * them: "of which" details and the in-process limiter under the step they belong to (found by the
 * step function, not by its name), and what is not paid per hit (an L1 miss, a token's first
 * verification, what a fill does once).
 *
 * Run alone: `REDIS_URL=redis://127.0.0.1:6379 node dist-bench/bench/hit-breakdown.js` (it writes
 * keys under the `benchhb` prefix only). `npm run bench` runs it after the load phases.
 */
import { once } from 'node:events';
import { type IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { accessListsOver } from '../src/auth/access-lists.js';
import { type Authenticator, createAuthenticator } from '../src/auth/authenticate.js';
import type { Principal } from '../src/auth/principal.js';
import { createTokenVerifier, tokenDigest } from '../src/auth/verify-token.js';
import { cacheAddress } from '../src/cache/cache-key.js';
import { LOCAL_COORDINATOR } from '../src/cache/coordinator.js';
import { brotliBody, type CacheEntry, decodeEntry, encodeEntry, strongEtag } from '../src/cache/entry.js';
import { L1Cache } from '../src/cache/l1.js';
import { CachePolicies } from '../src/cache/policy.js';
import { createReadService, type ReadService } from '../src/cache/read-service.js';
import { createRedisStore } from '../src/cache/redis-store.js';
import type { CacheStore } from '../src/cache/store.js';
import { API_PREFIX } from '../src/catalog/resources.js';
import { DEV_SECRET, mintDevToken } from '../src/cli/dev-credentials.js';
import { BUILT_IN_CONFIG } from '../src/config/schema.js';
import { createOperatorControl } from '../src/control/operator-control.js';
import { createInboundLimiter, type InboundLimiter } from '../src/limits/inbound.js';
import type { RatePolicy } from '../src/limits/limit-verdict.js';
import { createLogger, createRequestLog, type RequestLog, type RequestLogFields } from '../src/observability/logger.js';
import { createMetrics } from '../src/observability/metrics.js';
import { createDataPlane, type DataPlaneOptions, openExchange } from '../src/planes/data/data-plane.js';
import type { Exchange } from '../src/planes/data/exchange.js';
import {
  applyInboundLimits,
  authenticate,
  type DataPlaneParts,
  REQUEST_FLOW,
  readThroughCache,
  respondWithRead,
  type Step,
} from '../src/planes/data/steps.js';
import { createRedisClient, RedisHealth } from '../src/platform/redis.js';
import type { CanonicalRead } from '../src/request/canonical-read.js';
import { createCanonicalMemo } from '../src/request/memo.js';
import { generateDataset } from '../src/sandbox/dataset.js';
import { makeRequest } from './lib/parsed-request.js';
import { median } from './lib/stats.js';

export interface BreakdownPage {
  /** Path and query as a client sends it (under the API prefix). */
  readonly path: string;
  /** The page's bytes as the upstream sent them. */
  readonly body: Buffer;
  readonly company: string;
}

/** A request flow: named steps in their order (`REQUEST_FLOW`'s shape). */
export type Flow = ReadonlyArray<readonly [name: string, step: Step]>;

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

/** step: a per-hit row, summed; detail: part of (or an alternative to) the step above it. */
export type RowKind = 'step' | 'detail' | 'total' | 'context';

export interface BreakdownRow {
  readonly section: string;
  readonly label: string;
  readonly kind: RowKind;
  /** Mean µs per call, GC included. */
  readonly us: number;
  /** Median of the batch means, µs. */
  readonly medianUs: number;
}

export interface StepTiming {
  readonly name: string;
  readonly us: number;
  readonly medianUs: number;
}

export interface BreakdownReport {
  readonly rows: readonly BreakdownRow[];
  /** Per hit, in order: opening the exchange (`EXCHANGE_ROW`), then each step of a hit's path. */
  readonly steps: readonly StepTiming[];
  readonly stepSumUs: number;
  /** The real data plane, end to end (the request and response objects made untimed). */
  readonly dataPlaneUs: number;
  /** What the baseline server itself does per request: writeHead with 2 headers + end. */
  readonly baselineWriteUs: number;
  /** dataPlaneUs − baselineWriteUs: what a hit costs beyond the bare server's own work. */
  readonly extraOverBaselineUs: number;
  readonly storeMissAmortisedUs: number | undefined;
  /** What the rows leave out, and why (steps a hit never reaches, details of such steps). */
  readonly notes: readonly string[];
}

/** The per-hit work of the data plane before its first step: `openExchange`. */
export const EXCHANGE_ROW = 'exchange';
const FLOW_SECTION = 'request flow (REQUEST_FLOW, src/planes/data/steps.ts)';

interface Timing {
  readonly meanUs: number;
  readonly medianUs: number;
  /** CPU time of this process per call, µs, over the timed batches. */
  readonly cpuUs: number;
}

/** What is timed: a batch's inputs, made untimed, and one call on one of them. */
interface Workload<T> {
  prepare(size: number): T[] | Promise<T[]>;
  /** A promise it returns is awaited, inside the timing (as `runSteps` awaits a step's). */
  run(input: T): unknown;
  readonly batch?: number;
}

const BATCH = 256;
const WARMUP_MS = 60;
const MIN_BATCHES = 10;
/** Untimed preparation can cost many times the step it prepares: each row's wall time is bounded too. */
const WALL_PER_MEASURED = 4;
const PREFIX = 'benchhb';
/** High enough never to refuse: the cost of deciding, not of refusing. */
const NEVER_REFUSING: RatePolicy = { points: 1_000_000_000, duration: 60 };

/** Results are written here so that the compiler cannot drop the work being measured. */
export let sink: unknown;

/** Times `work` in batches for `ms` of measured time (or `WALL_PER_MEASURED` × that of wall time); warms it up first. */
async function measure<T>(work: Workload<T>, ms: number): Promise<Timing> {
  const batch = work.batch ?? BATCH;
  const runBatch = async (): Promise<{ elapsed: bigint; cpuUs: number; calls: number }> => {
    const inputs = await work.prepare(batch);
    const cpuBefore = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (const input of inputs) {
      const result = work.run(input);
      sink = result instanceof Promise ? await result : result;
    }
    const elapsed = process.hrtime.bigint() - started;
    const cpu = process.cpuUsage(cpuBefore);
    return { elapsed, cpuUs: cpu.user + cpu.system, calls: inputs.length };
  };
  const warmUntil = performance.now() + Math.min(WARMUP_MS, ms);
  while (performance.now() < warmUntil) {
    await runBatch();
    await turn();
  }
  const means: number[] = [];
  let total = 0n;
  let cpuUs = 0;
  let calls = 0;
  const budget = BigInt(Math.round(ms * 1e6));
  const wallUntil = performance.now() + ms * WALL_PER_MEASURED;
  while ((total < budget && performance.now() < wallUntil) || means.length < MIN_BATCHES) {
    const measured = await runBatch();
    total += measured.elapsed;
    cpuUs += measured.cpuUs;
    calls += measured.calls;
    means.push(Number(measured.elapsed) / 1e3 / measured.calls);
    await turn();
  }
  return { meanUs: Number(total) / 1e3 / calls, medianUs: median(means), cpuUs: cpuUs / calls };
}

/** The i-th of a list taken round and round. */
function cycle<T>(list: readonly T[], i: number): T {
  const item = list[i % list.length];
  if (item === undefined) throw new Error('hit-breakdown: an empty list');
  return item;
}

/** A workload over a running call index, for what needs no fresh objects per call. */
function indexed(run: (i: number) => unknown, batch?: number): Workload<number> {
  let next = 0;
  return {
    prepare: (size) => Array.from({ length: size }, () => next++),
    run,
    ...(batch !== undefined && { batch }),
  };
}

/** Company 1's movements, by keyset, 30 records a page, as the sandbox would answer them. */
function defaultPages(): BreakdownPage[] {
  const records = (generateDataset().get('movements') ?? []).filter((r) => String(r.company_id) === '1');
  const pages: BreakdownPage[] = [];
  for (let start = 0; start + 30 <= records.length; start += 30) {
    const page = records.slice(start, start + 30);
    const hasMore = start + 30 < records.length;
    const last = page[page.length - 1];
    const body = {
      data: page,
      meta: { per_page: 30, has_more: hasMore, next_after_id: hasMore && last !== undefined ? last.id : null },
    };
    const after = start === 0 ? undefined : records[start - 1]?.id;
    pages.push({
      path: `${API_PREFIX}/movements?${after === undefined ? '' : `after_id=${after}&`}per_page=30`,
      body: Buffer.from(JSON.stringify(body)),
      company: '1',
    });
  }
  return pages;
}

/**
 * The request log as the data plane is given it, watching every answer: a hit must be answered
 * 200 from the cache, by the last step of its path and by no step before.
 */
function watchedLog(requestLog: RequestLog) {
  let answers = 0;
  let wrong: string | undefined;
  let last: RequestLogFields | undefined;
  let settle: (() => void) | undefined;
  const log: RequestLog = (fields) => {
    requestLog(fields);
    answers += 1;
    last = fields;
    if (fields.status !== 200 || fields.cache !== 'hit') wrong ??= `${String(fields.status)} (${String(fields.cache)})`;
    const done = settle;
    settle = undefined;
    done?.();
  };
  return {
    log,
    get answers(): number {
      return answers;
    },
    /** The fields of the latest answer: a real line, for timing the log alone. */
    get last(): RequestLogFields | undefined {
      return last;
    },
    /** Resolves at the next answer. */
    next(): Promise<void> {
      return new Promise<void>((resolve) => {
        settle = resolve;
      });
    },
    expectOnlyHits(what: string): void {
      if (wrong !== undefined) throw new Error(`hit-breakdown: ${what}: a request was answered ${wrong}, not a hit`);
    },
  };
}

/** The real parts, wired as src/app.ts wires them, and the variants some rows swap in. */
interface Rig {
  readonly planeOptions: DataPlaneOptions;
  /** What createDataPlane makes of `planeOptions`: what the steps are given. */
  readonly parts: DataPlaneParts;
  readonly answers: ReturnType<typeof watchedLog>;
  /** The request log as shipped, unwatched. */
  readonly requestLog: RequestLog;
  readonly destination: ReturnType<typeof pino.destination>;
  readonly store: CacheStore;
  readonly l1: L1Cache;
  readonly policies: CachePolicies;
  /** The inbound limits of a single replica: in process, no Redis. */
  readonly localLimiter: InboundLimiter;
  /** The read service without an L1: every read is an L1 miss. */
  readonly readsWithoutL1: ReadService;
  /** An authenticator that remembers no token: each one is verified (jose). */
  readonly firstSight: Authenticator;
  close(): Promise<void>;
}

async function wire(redisUrl: string, secret: string): Promise<Rig> {
  const config = BUILT_IN_CONFIG;
  // First, so that nothing else is left running when Redis cannot be reached.
  const client = createRedisClient({ url: redisUrl, commandTimeoutMs: config.redis.commandTimeoutMs });
  try {
    if (client.status !== 'ready') await once(client, 'ready');
  } catch (error) {
    client.disconnect();
    throw error;
  }
  const control = createOperatorControl(); // this replica's operator state alone: nothing revoked or blocked
  const lists = accessListsOver(control.state);
  // The bench proxies' policies (bench/run.ts): every page stays fresh for the whole run.
  const policies = new CachePolicies(
    { ...config.cache, defaults: { ...config.cache.defaults, ttl: 3600 }, resources: {} },
    control.overrides(),
  );
  const verifierOptions = {
    keys: { kind: 'secret', secret },
    clockToleranceSeconds: config.auth.clockTolerance,
    claims: config.auth.claims,
  } as const;
  const verifier = createTokenVerifier(verifierOptions);
  const uncachedVerifier = createTokenVerifier({ ...verifierOptions, cache: false });
  const metrics = createMetrics({ processMetrics: false });
  const store = createRedisStore({ client, health: new RedisHealth(client), prefix: PREFIX });
  const l1 = new L1Cache({ maxBytes: config.cache.l1.maxBytes, ttlMs: config.cache.l1.ttl * 1000 });
  const readOptions = {
    store,
    coordinator: LOCAL_COORDINATOR,
    policies,
    keyPrefix: PREFIX,
    fetch: () => Promise.reject(new Error('hit-breakdown: a hit must not reach the upstream')),
    coalesceWaitMs: 1_000,
    metrics,
  };
  const limits = { perCredential: NEVER_REFUSING, perCompany: NEVER_REFUSING, replicas: 1 };
  // The shipped destination's settings (src/observability/logger.ts), writing to /dev/null.
  const destination = pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 });
  const requestLog = createRequestLog(createLogger('info', destination));
  const answers = watchedLog(requestLog);
  const planeOptions: DataPlaneOptions = {
    authenticator: createAuthenticator(verifier, lists),
    limiter: createInboundLimiter({
      ...limits,
      // Its own breaker, as in src/app.ts.
      redis: { client, health: new RedisHealth(client), prefix: PREFIX, timeoutMs: config.redis.commandTimeoutMs },
    }),
    lists,
    policy: { requiredScope: config.auth.requiredScope, requiredModule: config.auth.requiredModule },
    reads: createReadService({ ...readOptions, l1 }),
    log: answers.log,
    metrics,
    yieldUnknownResources: false,
  };
  return {
    planeOptions,
    parts: { ...planeOptions, memo: createCanonicalMemo() },
    answers,
    requestLog,
    destination,
    store,
    l1,
    policies,
    localLimiter: createInboundLimiter(limits),
    readsWithoutL1: createReadService({ ...readOptions, l1: undefined }),
    firstSight: createAuthenticator(uncachedVerifier, lists),
    async close() {
      // Leave nothing behind: the bench keys, the connection, the timers, the log stream.
      const keys = await client.keys(`${PREFIX}:*`);
      if (keys.length > 0) await client.del(...keys);
      client.disconnect();
      verifier.close();
      uncachedVerifier.close();
      control.close();
      await new Promise<void>((resolve) => {
        destination.flush((error?: Error) => {
          sink = error;
          resolve();
        });
      });
      destination.end();
    },
  };
}

/** A request as node's parser hands it over, and its response: made untimed. */
interface Fresh {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
}

/** The pages' requests, each with its company's token, as fresh objects and as exchanges. */
interface Traffic {
  readonly tokens: readonly string[];
  /** The next page's request and response (the pages in turn). */
  fresh(): Fresh;
  open(fresh: Fresh): Exchange;
  /** The next page's exchange, taken through `steps`, none of which may answer it. */
  through(steps: Flow): Promise<Exchange>;
  close(): void;
}

/** A token for each company of the pages, signed with the secret the verifier is given. */
async function tokensFor(pages: readonly BreakdownPage[], secret: string): Promise<ReadonlyMap<string, string>> {
  const tokenOf = new Map<string, string>();
  for (const company of new Set(pages.map((p) => p.company))) {
    const claim = /^[1-9][0-9]*$/.test(company) ? Number(company) : company;
    tokenOf.set(company, await mintDevToken({ company: claim, secret }));
  }
  return tokenOf;
}

function trafficOf(pages: readonly BreakdownPage[], tokenOf: ReadonlyMap<string, string>, rig: Rig): Traffic {
  const requests = pages.map((page) => {
    const token = tokenOf.get(page.company) ?? '';
    return { url: page.path, token, rawHeaders: ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${token}`] };
  });
  const socket = new Socket();
  let served = 0;
  const traffic: Traffic = {
    tokens: requests.map((r) => r.token),
    fresh() {
      const request = cycle(requests, served++);
      const req = makeRequest(socket, request.url, request.rawHeaders);
      return { req, res: new ServerResponse(req) };
    },
    open({ req, res }) {
      const ex = openExchange(req, res, false);
      if (ex === undefined) throw new Error(`hit-breakdown: ${String(req.url)} is not the data plane's`);
      return ex;
    },
    async through(steps) {
      const ex = traffic.open(traffic.fresh());
      for (const [name, step] of steps) {
        if (await step(ex, rig.parts)) {
          rig.answers.expectOnlyHits(`step "${name}"`);
          throw new Error(`hit-breakdown: step "${name}" answered a hit before the last step of its path`);
        }
      }
      return ex;
    },
    close: () => socket.destroy(),
  };
  return traffic;
}

/** An entry as a fill makes it (its brotli body made once, then), fresh for the whole run. */
function filledEntry(body: Buffer, storedAt: number, generation: string): CacheEntry {
  const etag = strongEtag(body);
  return {
    status: 200,
    contentType: 'application/json',
    etag,
    body,
    brotli: brotliBody(body, etag),
    storedAt,
    freshUntil: storedAt + 3_600_000,
    keepUntil: storedAt + 3_700_000,
    generation,
  };
}

/** A row's timing, beside the step it belongs to (found by the step's function, whatever its name). */
interface Detail {
  readonly of: Step;
  readonly label: string;
  /** `k`: the step's place on a hit's path. */
  timing(k: number): Promise<Timing>;
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

  const tokenOf = await tokensFor(pages, secret);
  const rig = await wire(options.redisUrl, secret);
  const { parts, answers, policies } = rig;
  const traffic = trafficOf(pages, tokenOf, rig);
  try {
    // ── each page stored as a fill stores it; each token verified once, by the flow itself ──
    const atRead: Array<{ read: CanonicalRead; principal: Principal }> = [];
    for (const _ of pages) {
      const { read, identity } = await traffic.through(flow.slice(0, readAt));
      if (read === undefined || identity === undefined) throw new Error('hit-breakdown: no read before the cache');
      atRead.push({ read, principal: identity.principal });
    }
    const addresses = atRead.map(({ read, principal }) =>
      cacheAddress(PREFIX, read, principal, policies.policyFor(read.resource.name).partition),
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
    for (const _ of pages) await throughPlane(traffic.fresh());
    answers.expectOnlyHits('the data plane');

    // ── a hit's path: the steps up to the one that answers it ──
    const probe = traffic.open(traffic.fresh());
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
    const onPath = (step: Step): number | undefined => {
      const k = path.findIndex(([, s]) => s === step);
      return k < 0 ? undefined : k;
    };
    /** Step k of the path alone (with other parts if given), on exchanges taken through the steps before it. */
    const stepAlone = (k: number, stepParts: DataPlaneParts = parts, batch?: number): Workload<Exchange> => {
      const step = path[k]?.[1];
      if (step === undefined) throw new Error(`hit-breakdown: no step ${String(k)}`);
      const before = path.slice(0, k);
      return {
        async prepare(size) {
          const exchanges: Exchange[] = [];
          for (let j = 0; j < size; j++) exchanges.push(await traffic.through(before));
          return exchanges;
        },
        run: (ex) => step(ex, stepParts),
        ...(batch !== undefined && { batch }),
      };
    };
    const freshBatch: Workload<Fresh>['prepare'] = (size) => Array.from({ length: size }, traffic.fresh);

    const lastAnswer = (): RequestLogFields => {
      if (answers.last === undefined) throw new Error('hit-breakdown: no request logged');
      return answers.last;
    };
    const details: readonly Detail[] = [
      {
        of: authenticate,
        label: 'of which tokenDigest (SHA-256 of the token: the cache key)',
        timing: () => time(indexed((i) => tokenDigest(cycle(traffic.tokens, i)))),
      },
      {
        of: applyInboundLimits,
        label: 'instead: the in-process limiter (one replica, no Redis)',
        timing: (k) => time(stepAlone(k, { ...parts, limiter: rig.localLimiter })),
      },
      {
        of: readThroughCache,
        label: 'of which policyFor + cacheAddress (the key and its group tag)',
        timing: () =>
          time(
            indexed((i) => {
              const { read, principal } = cycle(atRead, i);
              const policy = policies.policyFor(read.resource.name);
              return cacheAddress(PREFIX, read, principal, policy.partition).tag;
            }),
          ),
      },
      {
        of: readThroughCache,
        label: 'of which L1Cache.get',
        timing: () =>
          time(
            indexed((i) => {
              const address = cycle(addresses, i);
              return rig.l1.get(address.key, address.tag);
            }),
          ),
      },
      {
        of: respondWithRead,
        label: 'of which the request log line (a template, gathered per turn, as shipped)',
        timing: () => {
          const fields = lastAnswer();
          return time(indexed(() => rig.requestLog(fields)));
        },
      },
      {
        of: respondWithRead,
        label: 'of which destination.write of one ready line (sonic-boom; shipped: once per turn)',
        timing: () => {
          // The line the shipped log writes for the latest answer, caught on its way out.
          let line = '';
          const catchLine = (text: string): void => {
            line = text;
          };
          const logger = createLogger('info', { write: catchLine });
          createRequestLog(logger)(lastAnswer());
          logger.flush(); // gathered until the turn ends: written now
          return time(indexed(() => rig.destination.write(line)));
        },
      },
    ];
    for (const detail of details) {
      if (onPath(detail.of) === undefined)
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
      const timing = await time(stepAlone(k));
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
      prepare: (size) => Array.from({ length: size }, () => traffic.fresh().res),
      run(res) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': sample.body.length });
        res.end(sample.body);
        return res;
      },
    });

    // ── not per hit ──
    const CONTEXT = 'not per hit';
    let storeMissCpuUs: number | undefined;
    const readK = onPath(readThroughCache);
    if (readK !== undefined) {
      const miss = await time(stepAlone(readK, { ...parts, reads: rig.readsWithoutL1 }, 32));
      storeMissCpuUs = miss.cpuUs;
      addRow(CONTEXT, 'read step on an L1 miss: the store (Redis MGET + decodeEntry), wall', 'context', miss);
      addRow(CONTEXT, 'the same, CPU of this process', 'context', { meanUs: miss.cpuUs, medianUs: miss.cpuUs });
    }
    const authK = onPath(authenticate);
    if (authK !== undefined) {
      const firstSight = await time(stepAlone(authK, { ...parts, authenticator: rig.firstSight }, 32));
      addRow(CONTEXT, 'authenticate step, a token not seen lately (jose HS256 verify)', 'context', firstSight);
    }
    const stored = encodeEntry(sample);
    const decoded = await time(indexed(() => decodeEntry(stored), 32));
    addRow(CONTEXT, 'decodeEntry alone (brotli, one page)', 'context', decoded);
    const compressed = await time(indexed(() => brotliBody(sample.body, sample.etag), 16));
    addRow(CONTEXT, 'brotliBody (brotli q4 of one page; once per fill)', 'context', compressed);
    const encoded = await time(indexed(() => encodeEntry(sample), 32));
    addRow(CONTEXT, 'encodeEntry of a filled entry (compressed already; once per fill)', 'context', encoded);

    // The L1 keeps a copy for l1.ttl: each process reads each key from Redis once per ttl.
    const l1TtlSeconds = BUILT_IN_CONFIG.cache.l1.ttl;
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
    traffic.close();
    await rig.close();
  }
}

/** The BENCH_RESULT figures: µs per hit of each step (by name, in snake case) and of the whole data plane. */
export function breakdownResult(report: BreakdownReport): Record<string, number> {
  return Object.fromEntries([
    ...report.steps.map((step) => [step.name.toLowerCase().replaceAll(/[^a-z0-9]+/g, '_'), step.us]),
    ['data_plane', report.dataPlaneUs],
  ]);
}

export function formatBreakdown(report: BreakdownReport): string {
  const lines: string[] = [];
  // As wide as the longest label (a step's name is the flow's to choose), and never narrower than it was.
  const width = Math.max(66, ...report.rows.map((row) => row.label.length + (row.kind === 'detail' ? 4 : 2)));
  const total = report.dataPlaneUs > 0 ? report.dataPlaneUs : report.stepSumUs;
  lines.push(`  ${'step'.padEnd(width)} ${'µs/hit'.padStart(8)} ${'median'.padStart(8)} ${'share'.padStart(6)}`);
  let section = '';
  for (const row of report.rows) {
    if (row.section !== section) {
      section = row.section;
      lines.push(`  [${section}]`);
    }
    const label = row.kind === 'detail' ? `    ${row.label}` : `  ${row.label}`;
    const share = row.kind === 'step' ? `${((100 * row.us) / total).toFixed(0)}%` : '';
    lines.push(
      `  ${label.padEnd(width)} ${row.us.toFixed(2).padStart(8)} ${row.medianUs === 0 ? ''.padStart(8) : row.medianUs.toFixed(2).padStart(8)} ${share.padStart(6)}`,
    );
  }
  lines.push(`  by step (µs): ${report.steps.map((step) => `${step.name} ${step.us.toFixed(2)}`).join(' · ')}`);
  if (report.storeMissAmortisedUs !== undefined) {
    lines.push(
      `  L1 misses amortised over hits at the measured rate: ${report.storeMissAmortisedUs.toFixed(3)} µs/hit`,
    );
  }
  for (const note of report.notes) lines.push(`  note: ${note}`);
  return lines.join('\n');
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
