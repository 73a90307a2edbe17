/**
 * Where a cache hit's microseconds go: an in-process microbenchmark of the hit path, stage by stage,
 * with the real modules of src/ (README, "How a request flows"). Each stage is timed with `process.hrtime.bigint()` over
 * batches of calls (the event loop turns between batches, so pino's asynchronous destination and
 * ioredis get to run, as they do in the server), and reported as mean µs per call (GC included)
 * and the median of the batch means.
 *
 * The stages partition what the data plane does on an L1 hit:
 *   parse  node:http header objects (req.headers, req.headersDistinct: lazy, never paid by the
 *          baseline), classifyTarget + resolveRoute, parseRawQuery + buildCanonicalRead, request id
 *   auth   authenticate (bearer, SHA-256 of the token, verified-token LRU, revocation), authorize
 *   key    policyFor + cacheAddress + groupTag
 *   store  the rest of reads.serve() on an L1 hit (L1 get, freshness, Cache-Status, outcome)
 *   write  respond(): the proxy's 8 headers + body into a ServerResponse (no socket: header
 *          serialisation and buffering; the syscall is the same for the baseline)
 *   log    the request line (pino, the shipped 4 KiB buffered destination, on /dev/null)
 * and the whole of it is measured once more end to end, through the real `createDataPlane`, with
 * fake sockets. The Redis MGET + decodeEntry of an L1 miss (once per key per L1 ttl per process)
 * and jose's signature check (first sight of a token) are shown apart: they are not per hit.
 *
 * Run alone: `REDIS_URL=redis://127.0.0.1:6379 node dist-bench/bench/hit-breakdown.js` (it writes
 * keys under the `benchhb` prefix only). `npm run bench` runs it after the load phases.
 */
import { once } from 'node:events';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { NO_ACCESS_LISTS } from '../src/auth/access-lists.js';
import { createAuthenticator } from '../src/auth/authenticate.js';
import { DEFAULT_AUTHORIZATION_POLICY, authorize } from '../src/auth/authorize.js';
import { readBearer } from '../src/auth/bearer.js';
import { DEFAULT_CLAIM_NAMES } from '../src/auth/claims.js';
import type { Principal } from '../src/auth/principal.js';
import { createTokenVerifier, tokenDigest } from '../src/auth/verify-token.js';
import { cacheAddress, groupTag } from '../src/cache/cache-key.js';
import { LOCAL_COORDINATOR } from '../src/cache/coordinator.js';
import { decodeEntry, encodeEntry, strongEtag } from '../src/cache/entry.js';
import { L1Cache } from '../src/cache/l1.js';
import { CachePolicies } from '../src/cache/policy.js';
import { type ReadOutcome, createReadService } from '../src/cache/read-service.js';
import { RedisHealth, createRedisClient } from '../src/platform/redis.js';
import { createInboundLimiter } from '../src/limits/inbound.js';
import { createRedisStore } from '../src/cache/redis-store.js';
import { API_PREFIX } from '../src/catalog/resources.js';
import { BUILT_IN_CONFIG } from '../src/config/schema.js';
import { DEV_SECRET, mintDevToken } from '../src/dev/dev-credentials.js';
import { ProxyError } from '../src/errors/proxy-error.js';
import { etagMatches } from '../src/http/conditional.js';
import { createDataPlane } from '../src/planes/data/data-plane.js';
import { requestIdOf } from '../src/http/request-id.js';
import { type RequestLog, createLogger, createRequestLog } from '../src/observability/logger.js';
import { type CanonicalRead, buildCanonicalRead } from '../src/request/canonical-read.js';
import { parseRawQuery } from '../src/request/query.js';
import { resolveRoute } from '../src/request/route.js';
import { classifyTarget } from '../src/request/target.js';
import { generateDataset } from '../src/sandbox/dataset.js';
import { median } from './lib/stats.js';

export interface BreakdownPage {
  /** Path and query as a client sends it (under the API prefix). */
  readonly path: string;
  /** The page's bytes as the upstream sent them. */
  readonly body: Buffer;
  readonly company: string;
}

export interface BreakdownOptions {
  readonly redisUrl: string;
  /** The HMAC secret that signs the tokens (any 32+ bytes). */
  readonly secret?: string;
  /** Defaults to company 1's movements, walked by keyset from the sandbox's dataset. */
  readonly pages?: readonly BreakdownPage[];
  /** Measured time per stage, ms (default 300). */
  readonly msPerStage?: number;
  /** The proxy's measured hit rate, to amortise the L1-miss store path over hits. */
  readonly hitsPerSecond?: number;
}

export type RowKind = 'stage' | 'detail' | 'total' | 'context';

export interface BreakdownRow {
  readonly group: string;
  readonly stage: string;
  readonly kind: RowKind;
  /** Mean µs per call, GC included. */
  readonly us: number;
  /** Median of the batch means, µs. */
  readonly medianUs: number;
}

export interface BreakdownReport {
  readonly rows: readonly BreakdownRow[];
  /** µs per group of the stages (parse, auth, key, store, write, log). */
  readonly groups: Readonly<Record<string, number>>;
  readonly stageSumUs: number;
  /** The real data plane, end to end, less building the request and response objects. */
  readonly dataPlaneUs: number;
  /** What the baseline server itself does per request: writeHead with 2 headers + end. */
  readonly baselineWriteUs: number;
  /** dataPlaneUs − baselineWriteUs: what a hit costs beyond the bare server's own work. */
  readonly extraOverBaselineUs: number;
  readonly storeMissAmortisedUs: number | undefined;
}

interface Timing {
  readonly meanUs: number;
  readonly medianUs: number;
}

const BATCH = 256;
const WARMUP_MS = 60;

/** Results are written here so that the compiler cannot drop the work being measured. */
export let sink: unknown;

/** Times `fn` (sync or async) in batches until `ms` of measured time; warms it up first. */
async function measure(fn: (i: number) => unknown, ms: number, asynchronous: boolean, batch = BATCH): Promise<Timing> {
  let i = 0;
  const runBatch = async (): Promise<bigint> => {
    const started = process.hrtime.bigint();
    if (asynchronous) {
      for (let j = 0; j < batch; j++) sink = await fn(i++);
    } else {
      for (let j = 0; j < batch; j++) sink = fn(i++);
    }
    return process.hrtime.bigint() - started;
  };
  const warmUntil = performance.now() + WARMUP_MS;
  while (performance.now() < warmUntil) {
    await runBatch();
    await turn();
  }
  const means: number[] = [];
  let total = 0n;
  let calls = 0;
  const budget = BigInt(Math.round(ms * 1e6));
  while (total < budget || means.length < 10) {
    const elapsed = await runBatch();
    total += elapsed;
    calls += batch;
    means.push(Number(elapsed) / 1e3 / batch);
    await turn();
  }
  return { meanUs: Number(total) / 1e3 / calls, medianUs: median(means) };
}

/** A request as node's parser leaves it: raw header lines, headers not yet materialised. */
function makeRequest(socket: Socket, url: string, rawHeaders: readonly string[]): IncomingMessage {
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = url;
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  // What the HTTP parser calls (_http_common.js): the `headers` getters build from these lazily.
  (req as unknown as { _addHeaderLines(lines: string[], n: number): void })._addHeaderLines(
    [...rawHeaders],
    rawHeaders.length,
  );
  req.complete = true;
  return req;
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

interface PreparedPage {
  readonly page: BreakdownPage;
  readonly url: string;
  readonly rawHeaders: readonly string[];
  readonly authorization: readonly string[];
  readonly read: CanonicalRead;
  principal: Principal | undefined;
}

export async function runHitBreakdown(options: BreakdownOptions): Promise<BreakdownReport> {
  const ms = options.msPerStage ?? 300;
  const secret = options.secret ?? DEV_SECRET;
  const pages = options.pages ?? defaultPages();
  if (pages.length === 0) throw new Error('hit-breakdown: no pages');
  const prefix = 'benchhb';

  // ── the real components, wired as src/app.ts wires them ──
  const lists = NO_ACCESS_LISTS;
  const verifier = createTokenVerifier({
    keys: { kind: 'secret', secret },
    clockToleranceSeconds: 30,
    claims: DEFAULT_CLAIM_NAMES,
  });
  const authenticator = createAuthenticator(verifier, lists);
  const policies = new CachePolicies(BUILT_IN_CONFIG.cache);
  const client = createRedisClient({ url: options.redisUrl, commandTimeoutMs: 100 });
  if (client.status !== 'ready') await once(client, 'ready');
  const health = new RedisHealth(client);
  const store = createRedisStore({ client, health, prefix });
  const l1 = new L1Cache({ maxBytes: BUILT_IN_CONFIG.cache.l1.maxBytes, ttlMs: BUILT_IN_CONFIG.cache.l1.ttl * 1000 });
  const reads = createReadService({
    store,
    l1,
    coordinator: LOCAL_COORDINATOR,
    policies,
    keyPrefix: prefix,
    fetch: () => Promise.reject(new Error('hit-breakdown: a hit must not reach the upstream')),
    coalesceWaitMs: 1_000,
  });
  // The shipped destination's settings (src/observability/logger.ts), writing to /dev/null.
  const destination = pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 });
  const logger = createLogger('info', destination);
  const requestLog = createRequestLog(logger);

  const tokens = new Map<string, string>();
  for (const company of new Set(pages.map((p) => p.company))) {
    tokens.set(
      company,
      await mintDevToken({ company: /^[1-9][0-9]*$/.test(company) ? Number(company) : company, secret }),
    );
  }
  const socket = new Socket();
  const prepared: PreparedPage[] = pages.map((page) => {
    const token = tokens.get(page.company) ?? '';
    const target = classifyTarget(page.path);
    if (target.kind !== 'api') throw new Error(`hit-breakdown: ${page.path} is not an API path`);
    const route = resolveRoute(target.path);
    if (route.kind !== 'list' && route.kind !== 'record') throw new Error(`hit-breakdown: ${page.path} names no read`);
    const read = buildCanonicalRead(route, parseRawQuery(target.rawQuery));
    if (read instanceof ProxyError) throw new Error(`hit-breakdown: ${page.path}: ${read.message}`);
    const rawHeaders = ['Host', '127.0.0.1:8080', 'Authorization', `Bearer ${token}`];
    return { page, url: page.path, rawHeaders, authorization: [`Bearer ${token}`], read, principal: undefined };
  });

  // Store every page under the bench prefix, in its group's generation, as a fill would.
  const now = Date.now();
  for (const p of prepared) {
    const identity = await authenticator.authenticate(p.authorization);
    if (identity instanceof ProxyError) throw new Error(`hit-breakdown: token refused: ${identity.code}`);
    p.principal = identity.principal;
    const address = cacheAddress(prefix, p.read, identity.principal, 'company');
    const generation = await store.ensureGeneration(address);
    if (generation === undefined) throw new Error('hit-breakdown: Redis is not usable');
    await store.save(address, {
      status: 200,
      contentType: 'application/json',
      etag: strongEtag(p.page.body),
      body: p.page.body,
      storedAt: now,
      freshUntil: now + 3_600_000,
      keepUntil: now + 3_700_000,
      generation,
    });
  }
  const at = (i: number): PreparedPage => prepared[i % prepared.length] as PreparedPage;
  const principalAt = (i: number): Principal => at(i).principal as Principal;

  // One real outcome, for the write stage's header values.
  const sample = at(0);
  const sampleOutcome = await reads.serve({ read: sample.read, principal: principalAt(0), token: '', requestId: 'x' });
  if (sampleOutcome instanceof ProxyError || sampleOutcome.cacheResult !== 'hit')
    throw new Error('hit-breakdown: the sample read is not a hit');
  const outcome: ReadOutcome = sampleOutcome;

  const rows: BreakdownRow[] = [];
  const add = (group: string, stage: string, kind: RowKind, t: Timing): Timing => {
    rows.push({ group, stage, kind, us: t.meanUs, medianUs: t.medianUs });
    return t;
  };
  const diff = (a: Timing, b: Timing): Timing => ({
    meanUs: Math.max(0, a.meanUs - b.meanUs),
    medianUs: Math.max(0, a.medianUs - b.medianUs),
  });

  // ── parse ──
  const buildReq = await measure((i) => makeRequest(socket, at(i).url, at(i).rawHeaders), ms, false);
  const headersToo = await measure(
    (i) => {
      const req = makeRequest(socket, at(i).url, at(i).rawHeaders);
      return [req.headers, req.headersDistinct];
    },
    ms,
    false,
  );
  add('parse', 'node:http header objects (req.headers + headersDistinct)', 'stage', diff(headersToo, buildReq));
  add(
    'parse',
    'classifyTarget + resolveRoute',
    'stage',
    await measure(
      (i) => {
        const target = classifyTarget(at(i).url);
        return target.kind === 'api' ? [resolveRoute(target.path), `${API_PREFIX}/${target.path}`] : target;
      },
      ms,
      false,
    ),
  );
  add(
    'parse',
    'parseRawQuery + buildCanonicalRead',
    'stage',
    await measure(
      (i) => {
        const target = classifyTarget(at(i).url);
        if (target.kind !== 'api') return target;
        const route = resolveRoute(target.path);
        const params = parseRawQuery(target.rawQuery);
        return route.kind === 'list' || route.kind === 'record' ? buildCanonicalRead(route, params) : route;
      },
      ms,
      false,
    ),
  );
  const materialised = prepared.map((p) => {
    const req = makeRequest(socket, p.url, p.rawHeaders);
    sink = req.headers;
    return req;
  });
  add(
    'parse',
    'request id (no X-Request-Id: randomUUID)',
    'stage',
    await measure((i) => requestIdOf(materialised[i % materialised.length] as IncomingMessage), ms, false),
  );

  // ── auth ──
  add(
    'auth',
    'authenticate, cached token (bearer, SHA-256, LRU, revocation)',
    'stage',
    await measure((i) => authenticator.authenticate(at(i).authorization), ms, true),
  );
  add(
    'auth',
    'of which readBearer (regexes)',
    'detail',
    await measure((i) => readBearer(at(i).authorization), ms, false),
  );
  add(
    'auth',
    'of which tokenDigest (SHA-256 of the token)',
    'detail',
    await measure((i) => tokenDigest(at(i).authorization[0] ?? ''), ms, false),
  );
  add(
    'auth',
    'authorize (permissions, scope, blocks)',
    'stage',
    await measure(
      (i) => authorize(principalAt(i), at(i).read.resource, DEFAULT_AUTHORIZATION_POLICY, lists),
      ms,
      false,
    ),
  );

  // ── limits ── (points high enough never to refuse: the cost of deciding, not of refusing)
  const limitPolicy = { points: 1_000_000_000, duration: 60 };
  const localLimiter = createInboundLimiter({ perCredential: limitPolicy, perCompany: limitPolicy, replicas: 1 });
  const sharedLimiter = createInboundLimiter({
    perCredential: limitPolicy,
    perCompany: limitPolicy,
    replicas: 1,
    redis: { client, health: new RedisHealth(client), prefix, timeoutMs: 100 },
  }); // its own breaker, as in src/app.ts
  add(
    'limits',
    'inbound limits, one replica (in process, synchronous)',
    'detail',
    await measure((i) => localLimiter.decide(principalAt(i)), ms, false),
  );
  add(
    'limits',
    'inbound limits, shared through Redis (leased points)',
    'stage',
    await measure((i) => sharedLimiter.decide(principalAt(i)), ms, true),
  );

  // ── key and store ──
  const key = add(
    'key',
    'policyFor + cacheAddress + groupTag',
    'stage',
    await measure(
      (i) => {
        const p = at(i);
        const policy = policies.policyFor(p.read.resource.name);
        const address = cacheAddress(prefix, p.read, principalAt(i), policy.partition);
        return groupTag(address.group);
      },
      ms,
      false,
    ),
  );
  const serve = await measure(
    (i) => reads.serve({ read: at(i).read, principal: principalAt(i), token: '', requestId: 'x' }),
    ms,
    true,
  );
  add('store', 'reads.serve() on an L1 hit, less the key', 'stage', diff(serve, key));
  const addresses = prepared.map((p) => cacheAddress(prefix, p.read, p.principal as Principal, 'company'));
  add(
    'store',
    'of which L1Cache.get',
    'detail',
    await measure(
      (i) => {
        const address = addresses[i % addresses.length];
        return address === undefined ? undefined : l1.get(address.key, groupTag(address.group));
      },
      ms,
      false,
    ),
  );

  // ── write ──
  const etag = outcome.etag ?? '""';
  const body = outcome.body;
  const buildRes = await measure(
    (i) => new ServerResponse(materialised[i % materialised.length] as IncomingMessage),
    ms,
    false,
  );
  const proxyWrite = await measure(
    (i) => {
      const req = materialised[i % materialised.length] as IncomingMessage;
      const res = new ServerResponse(req);
      // The headers of data-plane.ts respond() on a 200 hit, built the same way.
      const headers: Record<string, string | number> = {
        'content-type': outcome.contentType,
        'x-request-id': '3b241101-e2bb-4255-8caf-4136c566a962',
        'cache-status': outcome.cacheStatus,
      };
      headers['cache-control'] = `private, max-age=${outcome.maxAgeSeconds ?? 0}`;
      headers.vary = 'Authorization';
      headers.etag = etag;
      if (outcome.ageSeconds !== undefined) headers.age = outcome.ageSeconds;
      if (etagMatches(req.headers['if-none-match'], etag)) return undefined;
      headers['content-length'] = body.length;
      res.writeHead(200, headers);
      res.end(body);
      return res;
    },
    ms,
    false,
  );
  add('write', 'respond(): 8 headers + body into ServerResponse', 'stage', diff(proxyWrite, buildRes));
  const baselineWrite = diff(
    await measure(
      (i) => {
        const res = new ServerResponse(materialised[i % materialised.length] as IncomingMessage);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
        return res;
      },
      ms,
      false,
    ),
    buildRes,
  );

  // ── log ──
  add(
    'log',
    'request log line (pino, 4 KiB buffered writes, as shipped)',
    'stage',
    await measure(
      (i) => {
        requestLog({
          requestId: '3b241101-e2bb-4255-8caf-4136c566a962',
          method: 'GET',
          path: `${API_PREFIX}/${at(i).read.resource.name}`,
          resource: at(i).read.resource.name,
          status: 200,
          errorCode: undefined,
          company: principalAt(i).company,
          subject: principalAt(i).subject,
          cache: 'hit',
          upstreamMs: undefined,
          durationMs: 0.1234,
        });
        return undefined;
      },
      ms,
      false,
    ),
  );
  const sampleLine = `${JSON.stringify({ level: 30, time: now, req_id: '3b241101-e2bb-4255-8caf-4136c566a962', method: 'GET', path: `${API_PREFIX}/movements`, resource: 'movements', status: 200, company: '1', sub: 'dev-1', cache: 'hit', ms: 0.12 })}\n`;
  add(
    'log',
    'of which destination.write of a ready line (sonic-boom)',
    'detail',
    await measure(() => destination.write(sampleLine), ms, false),
  );

  // ── end to end: the real data plane ──
  let settle: (() => void) | undefined;
  let lastLine: { status: number; cache: string | undefined } | undefined;
  const log: RequestLog = (fields) => {
    requestLog(fields);
    lastLine = { status: fields.status, cache: fields.cache };
    const done = settle;
    settle = undefined;
    done?.();
  };
  const plane = createDataPlane({
    authenticator,
    limiter: sharedLimiter,
    lists,
    policy: DEFAULT_AUTHORIZATION_POLICY,
    reads,
    log,
    yieldUnknownResources: false,
  });
  const exchange = async (i: number): Promise<ServerResponse> => {
    const req = makeRequest(socket, at(i).url, at(i).rawHeaders);
    const res = new ServerResponse(req);
    const done = new Promise<void>((resolve) => {
      settle = resolve;
    });
    plane(req, res);
    await done;
    return res;
  };
  for (let i = 0; i < prepared.length; i++) {
    await exchange(i);
    if (lastLine?.status !== 200 || lastLine.cache !== 'hit') {
      throw new Error(
        `hit-breakdown: the data plane answered ${String(lastLine?.status)} (${String(lastLine?.cache)}) for ${at(i).url}, not a hit`,
      );
    }
  }
  const endToEnd = diff(await measure(exchange, ms * 2, true), {
    meanUs: buildReq.meanUs + buildRes.meanUs,
    medianUs: buildReq.medianUs + buildRes.medianUs,
  });
  settle = undefined;

  // ── not per hit ──
  const sampleEntry = {
    status: 200,
    contentType: 'application/json',
    etag,
    body,
    storedAt: now,
    freshUntil: now + 3_600_000,
    keepUntil: now + 3_700_000,
    generation: 'g',
  };
  const entryBytes = encodeEntry(sampleEntry);
  const firstAddress = addresses[0];
  let mgetCpu = 0;
  let storeMiss: Timing | undefined;
  if (firstAddress !== undefined) {
    const cpuBefore = process.cpuUsage();
    let mgets = 0;
    storeMiss = await measure(
      async (i) => {
        const address = addresses[i % addresses.length] ?? firstAddress;
        const [, raw] = await client.mgetBuffer(address.generationKey, address.key);
        mgets += 1;
        return raw === null || raw === undefined ? undefined : decodeEntry(raw);
      },
      ms,
      true,
      32,
    );
    const cpu = process.cpuUsage(cpuBefore);
    mgetCpu = (cpu.user + cpu.system) / mgets;
    add('context', 'L1 miss: Redis MGET + decodeEntry (wall, sequential)', 'context', storeMiss);
    add('context', 'L1 miss: the same, CPU of this process', 'context', { meanUs: mgetCpu, medianUs: mgetCpu });
  }
  add(
    'context',
    'decodeEntry alone (brotli, one page)',
    'context',
    await measure(() => decodeEntry(entryBytes), ms, false, 32),
  );
  add(
    'context',
    'encodeEntry (brotli q4; on a fill only)',
    'context',
    await measure(() => encodeEntry(sampleEntry), ms, false, 16),
  );
  const uncached = createTokenVerifier({
    keys: { kind: 'secret', secret },
    clockToleranceSeconds: 30,
    claims: DEFAULT_CLAIM_NAMES,
    cache: false,
  });
  const sampleToken = tokens.get(sample.page.company) ?? '';
  add(
    'context',
    'jose HS256 verify, uncached (first sight of a token)',
    'context',
    await measure(() => uncached.verify(sampleToken), ms, true, 32),
  );
  uncached.close();

  // The L1 keeps a copy for l1.ttl: each process reads each key from Redis once per ttl.
  const l1TtlSeconds = BUILT_IN_CONFIG.cache.l1.ttl;
  const storeMissAmortisedUs =
    options.hitsPerSecond !== undefined && options.hitsPerSecond > 0 && mgetCpu > 0
      ? (mgetCpu * Math.min(prepared.length / l1TtlSeconds, options.hitsPerSecond)) / options.hitsPerSecond
      : undefined;

  const stages = rows.filter((r) => r.kind === 'stage');
  const groups: Record<string, number> = {};
  for (const r of stages) groups[r.group] = (groups[r.group] ?? 0) + r.us;
  const stageSumUs = stages.reduce((sum, r) => sum + r.us, 0);
  rows.push({
    group: 'total',
    stage: 'Σ stages',
    kind: 'total',
    us: stageSumUs,
    medianUs: stages.reduce((s, r) => s + r.medianUs, 0),
  });
  rows.push({
    group: 'total',
    stage: 'data plane end to end (real createDataPlane, fake socket)',
    kind: 'total',
    us: endToEnd.meanUs,
    medianUs: endToEnd.medianUs,
  });
  rows.push({
    group: 'total',
    stage: 'unaccounted (awaits, closures, GC between stages)',
    kind: 'total',
    us: endToEnd.meanUs - stageSumUs,
    medianUs: 0,
  });
  rows.push({
    group: 'total',
    stage: "the baseline's own write (2 headers + body)",
    kind: 'total',
    us: baselineWrite.meanUs,
    medianUs: baselineWrite.medianUs,
  });
  rows.push({
    group: 'total',
    stage: 'a hit beyond the bare server (end to end − baseline write)',
    kind: 'total',
    us: endToEnd.meanUs - baselineWrite.meanUs,
    medianUs: endToEnd.medianUs - baselineWrite.medianUs,
  });

  // Leave nothing behind: the bench keys, the connection, the log stream.
  const keys = await client.keys(`${prefix}:*`);
  if (keys.length > 0) await client.del(...keys);
  client.disconnect();
  verifier.close();
  socket.destroy();
  await new Promise<void>((resolve) => {
    destination.flush((error?: Error) => {
      sink = error;
      resolve();
    });
  });
  destination.end();

  return {
    rows,
    groups,
    stageSumUs,
    dataPlaneUs: endToEnd.meanUs,
    baselineWriteUs: baselineWrite.meanUs,
    extraOverBaselineUs: endToEnd.meanUs - baselineWrite.meanUs,
    storeMissAmortisedUs,
  };
}

export function formatBreakdown(report: BreakdownReport): string {
  const lines: string[] = [];
  const width = 66;
  const total = report.dataPlaneUs > 0 ? report.dataPlaneUs : report.stageSumUs;
  lines.push(`  ${'stage'.padEnd(width)} ${'µs/hit'.padStart(8)} ${'median'.padStart(8)} ${'share'.padStart(6)}`);
  let section = '';
  for (const row of report.rows) {
    const heading = row.kind === 'context' ? 'not per hit' : row.kind === 'total' ? 'totals' : row.group;
    if (heading !== section) {
      section = heading;
      lines.push(`  [${heading}]`);
    }
    const label = row.kind === 'detail' ? `    ${row.stage}` : `  ${row.stage}`;
    const share = row.kind === 'stage' ? `${((100 * row.us) / total).toFixed(0)}%` : '';
    lines.push(
      `  ${label.padEnd(width)} ${row.us.toFixed(2).padStart(8)} ${row.medianUs === 0 ? ''.padStart(8) : row.medianUs.toFixed(2).padStart(8)} ${share.padStart(6)}`,
    );
  }
  const groups = Object.entries(report.groups)
    .map(([group, us]) => `${group} ${us.toFixed(2)}`)
    .join(' · ');
  lines.push(`  by group (µs): ${groups}`);
  if (report.storeMissAmortisedUs !== undefined) {
    lines.push(
      `  L1 misses amortised over hits at the measured rate: ${report.storeMissAmortisedUs.toFixed(3)} µs/hit`,
    );
  }
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
