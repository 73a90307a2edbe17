/**
 * The sandbox system of record (docs/sandbox.md): a faithful implementation of the seed for the embedded
 * default, the tests, the benchmarks and the load tests. It verifies tokens and permissions with
 * the proxy's own rules, scopes every answer to the token's company, pages by keyset exactly as the
 * seed says, answers 429 above its rate, and, when `control` is on, exposes a fault switch, the
 * count of requests it served, and the trace headers they carried (`traceparent`, `tracestate`,
 * `X-Request-Id`: how tests see what reaches the upstream).
 *
 * Query parsing deliberately does not reuse the proxy's canonicaliser: it reads the query the way
 * an ordinary server does (WHATWG URLSearchParams), so that the conformance suite compares two
 * independent readings of each request.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { NO_ACCESS_LISTS } from '../auth/access-lists.js';
import { DEFAULT_AUTHORIZATION_POLICY, authorize } from '../auth/authorize.js';
import { readBearer } from '../auth/bearer.js';
import type { ClaimNames } from '../auth/claims.js';
import type { KeySourceOptions } from '../auth/key-source.js';
import type { Principal } from '../auth/principal.js';
import { createTokenVerifier } from '../auth/verify-token.js';
import { API_PREFIX, type ResourceName, findResource } from '../catalog/resources.js';
import { PER_PAGE_DEFAULT, PER_PAGE_MAX, PER_PAGE_MIN } from '../catalog/grammar.js';
import { UnauthenticatedError } from '../errors/proxy-error.js';
import { closeServer, listenOn } from '../http/listen.js';
import { type Dataset, type SandboxRecord, generateDataset } from './dataset.js';
import { type Faults, FaultError, FaultSwitch, parseFaults } from './faults.js';

export interface SandboxOptions {
  readonly keys: KeySourceOptions;
  readonly issuer?: string;
  readonly audience?: string;
  readonly claims?: ClaimNames;
  /** Requests per second answered before 429 (fixed one-second windows); 0 turns it off. */
  readonly rateLimitPerSecond?: number;
  /** Exposes the fault switch and counters under `/__sandbox/` (tests only). */
  readonly control?: boolean;
  readonly seed?: number;
}

export interface SandboxStats {
  /** API requests received (every status). */
  served: number;
  inFlight: number;
  maxInFlight: number;
  /** Most API requests started within one wall-clock second. */
  maxPerSecond: number;
  /** Most API requests started within any 1 000 ms (a sliding window: stricter than the above). */
  maxPerSlidingSecond: number;
  /** API requests started in each wall-clock second (epoch seconds → count), the last 600. */
  startsBySecond: Record<string, number>;
  rateLimited: number;
  /** Requests received per path (with query), for tests that count one key's fetches. */
  byTarget: Record<string, number>;
  /**
   * Every API request's arrival (ms since the epoch, to the µs) and the requests in flight with it, the last
   * 20 000: for tests that judge phases of one run apart.
   */
  arrivals: Array<{ at: number; inFlight: number }>;
}

/**
 * What an API request carried that tests check (control on only): W3C Trace Context and the
 * request id. Never the credential, nor any other header.
 */
export interface ReceivedRequest {
  readonly target: string;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  readonly requestId: string | undefined;
}

/** Received requests kept for `received()`, newest last. */
const MAX_RECEIVED = 200;

export interface Sandbox {
  readonly server: Server;
  readonly dataset: Dataset;
  readonly faults: FaultSwitch;
  /** Listens and resolves the base URL (`http://127.0.0.1:<port>`). */
  listen(port?: number, host?: string): Promise<string>;
  readonly url: string;
  stats(): SandboxStats;
  /** The last API requests' trace headers (control on; else always empty). */
  received(): ReceivedRequest[];
  resetStats(): void;
  setRateLimit(perSecond: number): void;
  /**
   * Stops listening, so that connections are refused, for `ms` or until `accept()`; then listens
   * on the same port again. Resolves once it listens again.
   */
  refuse(ms: number): Promise<void>;
  /** Ends a refusal early. */
  accept(): void;
  close(): Promise<void>;
}

const CONTROL_PREFIX = '/__sandbox/';
const SMALL_ID = /^[0-9]{1,16}$/;

function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 65_536) throw new FaultError('body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new FaultError('body is not JSON');
  }
}

function emptyStats(): SandboxStats {
  return {
    served: 0,
    inFlight: 0,
    maxInFlight: 0,
    maxPerSecond: 0,
    maxPerSlidingSecond: 0,
    startsBySecond: {},
    rateLimited: 0,
    byTarget: {},
    arrivals: [],
  };
}

const MAX_ARRIVALS = 20_000;

export function createSandbox(options: SandboxOptions): Sandbox {
  const dataset = options.seed === undefined ? generateDataset() : generateDataset(options.seed);
  const verifier = createTokenVerifier({
    keys: options.keys,
    issuer: options.issuer,
    audience: options.audience,
    ...(options.claims !== undefined && { claims: options.claims }),
  });
  const noBlocks = NO_ACCESS_LISTS;
  const faults = new FaultSwitch();
  let stats = emptyStats();
  let received: ReceivedRequest[] = [];
  let rateLimit = options.rateLimitPerSecond ?? 0;
  let windowSecond = 0;
  let windowCount = 0;
  /** Start times (ms) within the last second, oldest first. */
  const recentStarts: number[] = [];
  let listenPort = 0;
  let listenHost = '127.0.0.1';
  let refusing: Promise<void> | undefined;
  let endRefusal: (() => void) | undefined;

  function countRequest(target: string): void {
    stats.served += 1;
    stats.inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    stats.byTarget[target] = (stats.byTarget[target] ?? 0) + 1;
    const second = Math.floor(Date.now() / 1000);
    if (second !== windowSecond) {
      windowSecond = second;
      windowCount = 0;
    }
    windowCount += 1;
    stats.maxPerSecond = Math.max(stats.maxPerSecond, windowCount);
    stats.startsBySecond[String(second)] = windowCount;
    const seconds = Object.keys(stats.startsBySecond);
    if (seconds.length > 600) delete stats.startsBySecond[seconds[0] ?? ''];
    const at = performance.now();
    recentStarts.push(at);
    while (recentStarts.length > 0 && (recentStarts[0] ?? at) <= at - 1_000) recentStarts.shift();
    stats.maxPerSlidingSecond = Math.max(stats.maxPerSlidingSecond, recentStarts.length);
    stats.arrivals.push({ at: performance.timeOrigin + at, inFlight: stats.inFlight });
    if (stats.arrivals.length > MAX_ARRIVALS) stats.arrivals.splice(0, stats.arrivals.length - MAX_ARRIVALS);
  }

  async function authenticate(req: IncomingMessage): Promise<Principal | undefined> {
    const bearer = readBearer(req.headersDistinct.authorization);
    if (bearer.kind !== 'token') return undefined;
    try {
      const principal = await verifier.verify(bearer.token);
      return principal;
    } catch (error) {
      if (error instanceof UnauthenticatedError) return undefined;
      throw error;
    }
  }

  function list(res: ServerResponse, resourceName: ResourceName, principal: Principal, query: URLSearchParams): void {
    const resource = findResource(resourceName);
    if (resource === undefined) return json(res, 404, { error: 'not_found' });
    const seen = new Set<string>();
    for (const name of query.keys()) {
      if (seen.has(name)) return json(res, 400, { error: 'invalid_parameter', parameter: name });
      seen.add(name);
      if (name !== 'per_page' && name !== 'after_id' && !resource.filterNames.has(name)) {
        return json(res, 400, { error: 'invalid_parameter', parameter: name });
      }
    }
    const perPageText = query.get('per_page');
    const perPage = perPageText === null ? PER_PAGE_DEFAULT : Number(perPageText);
    if (perPageText !== null && (!SMALL_ID.test(perPageText) || perPage < PER_PAGE_MIN || perPage > PER_PAGE_MAX)) {
      return json(res, 400, { error: 'invalid_parameter', parameter: 'per_page' });
    }
    const afterText = query.get('after_id');
    if (afterText !== null && !SMALL_ID.test(afterText))
      return json(res, 400, { error: 'invalid_parameter', parameter: 'after_id' });
    const afterId = afterText === null ? 0 : Number(afterText);
    const filters = resource.filters.map((f) => [f.name, query.get(f.name)] as const).filter(([, v]) => v !== null);
    const page: SandboxRecord[] = [];
    let hasMore = false;
    for (const record of dataset.get(resourceName) ?? []) {
      if (record.id <= afterId || String(record.company_id) !== principal.company) continue;
      if (!filters.every(([name, value]) => String(record[name]) === value)) continue;
      if (page.length === perPage) {
        hasMore = true;
        break;
      }
      page.push(record);
    }
    const last = page[page.length - 1];
    json(res, 200, {
      data: page,
      meta: { per_page: perPage, has_more: hasMore, next_after_id: hasMore && last !== undefined ? last.id : null },
    });
  }

  function single(
    res: ServerResponse,
    resourceName: ResourceName,
    principal: Principal,
    idText: string,
    query: URLSearchParams,
  ): void {
    for (const name of query.keys()) return json(res, 400, { error: 'invalid_parameter', parameter: name });
    const id = SMALL_ID.test(idText) ? Number(idText) : Number.NaN;
    const record = (dataset.get(resourceName) ?? []).find((r) => r.id === id);
    // Seed §4: another company's record is answered exactly like a missing one.
    if (record === undefined || String(record.company_id) !== principal.company)
      return json(res, 404, { error: 'not_found' });
    json(res, 200, { data: record });
  }

  async function answerApi(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: URLSearchParams,
  ): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(res, 405, { error: 'method_not_allowed' }, { allow: 'GET, HEAD' });
    const [name = '', id, ...rest] = path.split('/');
    const resource = findResource(name);
    if (resource === undefined || rest.length > 0) return json(res, 404, { error: 'not_found' });
    const principal = await authenticate(req);
    if (principal === undefined) {
      return json(
        res,
        401,
        { error: 'unauthenticated' },
        { 'www-authenticate': 'Bearer realm="sandbox", error="invalid_token"' },
      );
    }
    const forbidden = authorize(principal, resource, DEFAULT_AUTHORIZATION_POLICY, noBlocks);
    if (forbidden !== undefined)
      return json(res, 403, { error: 'forbidden', reason: forbidden.reason, missing: forbidden.missing });
    if (id === undefined) list(res, resource.name, principal, query);
    else single(res, resource.name, principal, id, query);
  }

  function corrupt(res: ServerResponse, fault: Faults['body']): void {
    if (fault === 'malformed' || fault === 'not-object') {
      const body = fault === 'malformed' ? '{"data": [' : '[]';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } else {
      // Promise 4 KiB, send a little, then drop the connection: a truncated body.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 4096 });
      res.write('{"data": [{"id": 1');
      setImmediate(() => res.socket?.destroy());
    }
  }

  function record(req: IncomingMessage, target: string): void {
    const one = (value: string | string[] | undefined): string | undefined =>
      Array.isArray(value) ? value.join(', ') : value;
    received.push({
      target,
      traceparent: one(req.headers.traceparent),
      tracestate: one(req.headers.tracestate),
      requestId: one(req.headers['x-request-id']),
    });
    if (received.length > MAX_RECEIVED) received = received.slice(-MAX_RECEIVED);
  }

  async function handleApi(req: IncomingMessage, res: ServerResponse, target: string): Promise<void> {
    countRequest(target);
    if (options.control === true) record(req, target);
    res.on('close', () => {
      stats.inFlight -= 1;
    });
    if (rateLimit > 0 && windowCount > rateLimit) {
      stats.rateLimited += 1;
      return json(res, 429, { error: 'rate_limited' }, { 'retry-after': '1' });
    }
    const queryAt = target.indexOf('?');
    const path = (queryAt === -1 ? target : target.slice(0, queryAt)).slice(API_PREFIX.length + 1);
    const query = new URLSearchParams(queryAt === -1 ? '' : target.slice(queryAt + 1));
    const fault = faults.take(path.split('/')[0]);
    if (fault?.latencyMs !== undefined) await delay(fault.latencyMs);
    if (fault?.status !== undefined) {
      return json(
        res,
        fault.status,
        { error: `fault_${fault.status}` },
        fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter },
      );
    }
    if (fault?.body !== undefined) return corrupt(res, fault.body);
    await answerApi(req, res, path, query);
  }

  async function handleControl(req: IncomingMessage, res: ServerResponse, action: string): Promise<void> {
    try {
      if (action === 'stats' && req.method === 'GET') return json(res, 200, stats);
      if (action === 'requests' && req.method === 'GET') return json(res, 200, received);
      if (action === 'reset' && req.method === 'POST') {
        stats = emptyStats();
        received = [];
        faults.clear();
        return json(res, 200, { ok: true });
      }
      if (action === 'faults' && req.method === 'PUT') {
        const parsed = parseFaults(await readJson(req));
        if (parsed.refuseForMs !== undefined) {
          json(res, 202, { ok: true });
          void sandbox.refuse(parsed.refuseForMs);
          return;
        }
        faults.set(parsed);
        return json(res, 200, { ok: true });
      }
      if (action === 'faults' && req.method === 'DELETE') {
        faults.clear();
        return json(res, 200, { ok: true });
      }
      if (action === 'rate-limit' && req.method === 'PUT') {
        const body = await readJson(req);
        const perSecond = typeof body === 'object' && body !== null && 'perSecond' in body ? body.perSecond : undefined;
        if (typeof perSecond !== 'number' || !Number.isInteger(perSecond) || perSecond < 0)
          throw new FaultError('perSecond must be an integer ≥ 0');
        rateLimit = perSecond;
        return json(res, 200, { ok: true });
      }
      json(res, 404, { error: 'not_found' });
    } catch (error) {
      json(res, 400, { error: error instanceof FaultError ? error.message : 'bad request' });
    }
  }

  const server = createServer((req, res) => {
    const target = req.url ?? '/';
    const done = (promise: Promise<void>): void => {
      promise.catch(() => {
        if (!res.headersSent) json(res, 500, { error: 'internal' });
        else res.destroy();
      });
    };
    if (options.control === true && target.startsWith(CONTROL_PREFIX))
      return done(handleControl(req, res, target.slice(CONTROL_PREFIX.length)));
    if (target.startsWith(`${API_PREFIX}/`)) return done(handleApi(req, res, target));
    json(res, 404, { error: 'not_found' });
  });
  server.keepAliveTimeout = 65_000;

  const sandbox: Sandbox = {
    server,
    dataset,
    faults,
    async listen(port = 0, host = '127.0.0.1') {
      listenHost = host;
      listenPort = await listenOn(server, port, host);
      return sandbox.url;
    },
    get url() {
      const host = listenHost.includes(':') ? `[${listenHost}]` : listenHost === '0.0.0.0' ? '127.0.0.1' : listenHost;
      return `http://${host}:${listenPort}`;
    },
    stats: () => structuredClone(stats),
    received: () => [...received],
    resetStats() {
      stats = emptyStats();
      received = [];
      recentStarts.length = 0;
    },
    setRateLimit(perSecond) {
      rateLimit = perSecond;
    },
    refuse(ms) {
      refusing ??= (async () => {
        const ended = new Promise<void>((resolve) => {
          endRefusal = resolve;
        });
        await closeServer(server, 0);
        const timer = new AbortController();
        await Promise.race([delay(ms, undefined, { signal: timer.signal }).catch(() => undefined), ended]);
        timer.abort();
        endRefusal = undefined;
        await listenOn(server, listenPort, listenHost);
        refusing = undefined;
      })();
      return refusing;
    },
    accept() {
      endRefusal?.();
    },
    async close() {
      await refusing;
      verifier.close();
      await closeServer(server, 0);
    },
  };
  return sandbox;
}
