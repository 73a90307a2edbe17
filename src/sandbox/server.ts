/**
 * The sandbox system of record (docs/sandbox.md): a faithful implementation of the seed for the embedded
 * default, the tests, the benchmarks and the load tests. The tests judge the proxy against it, so it
 * implements the upstream API's rules on its own, written from the specification (the seed) alone and
 * nothing taken from the proxy's auth, request or catalog code, so that a mistake there is not made
 * twice and agreed with:
 *
 * - the thirteen resources, their filters and the permission each needs (seed §2, §5: `resources.ts`);
 * - the bearer credential, its token checks and what its claims mean (seed §5, §7: `credentials.ts`);
 * - the permission check, for the credential and any employee, scope and plan modules (seed §5, §7:
 *   `access.ts`);
 * - the query: filters, `per_page`, `after_id`, the record id (seed §2, §4, §8: `query.ts`);
 * - company scoping (seed §5.2: every answer holds only the credential's company's records, and
 *   another company's record is a 404 like a missing one, §4) and keyset pages (seed §4: `data`,
 *   `meta.per_page`, `meta.has_more`, `meta.next_after_id`; null when there is no next page) here.
 *
 * Its refusals, checked in this order: 405 (not GET or HEAD), 404 (no such resource or path), 401
 * (seed §7: no valid credential), 403 (seed §7: access denied), 400 (a query the seed does not
 * allow), 404 (no such record in the credential's company). Bodies are small JSON objects
 * (`{"error": …}`; the seed leaves their shape open). It answers 429 above its rate and, when
 * `control` is on, exposes a fault switch, the count of requests it served, and the trace headers
 * they carried (`traceparent`, `tracestate`, `X-Request-Id`: how tests see what reaches the upstream).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { closeServer, listenOn } from '../http/listen.js';
import { denial } from './access.js';
import {
  type Credential,
  type SandboxClaimNames,
  type SandboxKeys,
  bearerToken,
  credentialChecker,
} from './credentials.js';
import { type Dataset, type SandboxRecord, generateDataset } from './dataset.js';
import { type Faults, FaultError, FaultSwitch, parseFaults } from './faults.js';
import { type ListQuery, readListQuery, readRecordQuery, recordId } from './query.js';
import { API_PREFIX, type SeedResource, seedResource } from './resources.js';

export interface SandboxOptions {
  readonly keys: SandboxKeys;
  readonly issuer?: string;
  readonly audience?: string;
  readonly claims?: SandboxClaimNames;
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
  const checkToken = credentialChecker({
    keys: options.keys,
    issuer: options.issuer,
    audience: options.audience,
    claims: options.claims,
  });
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

  async function authenticate(req: IncomingMessage): Promise<Credential | undefined> {
    const token = bearerToken(req.headersDistinct.authorization);
    return token === undefined ? undefined : checkToken(token);
  }

  /** Seed §5.2: a record is the credential's when it belongs to the credential's company. */
  function owns(credential: Credential, record: SandboxRecord): boolean {
    return String(record.company_id) === credential.company;
  }

  /** Seed §4: a keyset page of the company's records, filtered, ordered by id. */
  function list(res: ServerResponse, resource: SeedResource, credential: Credential, query: ListQuery): void {
    const page: SandboxRecord[] = [];
    let hasMore = false;
    for (const record of dataset.get(resource.name) ?? []) {
      if (record.id <= query.afterId || !owns(credential, record)) continue;
      if (!query.filters.every(([name, value]) => String(record[name]) === value)) continue;
      if (page.length === query.perPage) {
        hasMore = true;
        break;
      }
      page.push(record);
    }
    const last = page[page.length - 1];
    json(res, 200, {
      data: page,
      meta: {
        per_page: query.perPage,
        has_more: hasMore,
        next_after_id: hasMore && last !== undefined ? last.id : null,
      },
    });
  }

  /** Seed §4: one record; another company's record is answered exactly like a missing one (404). */
  function single(res: ServerResponse, resource: SeedResource, credential: Credential, idText: string): void {
    const id = recordId(idText);
    const record = id === undefined ? undefined : (dataset.get(resource.name) ?? []).find((r) => r.id === id);
    if (record === undefined || !owns(credential, record)) return json(res, 404, { error: 'not_found' });
    json(res, 200, { data: record });
  }

  async function answerApi(req: IncomingMessage, res: ServerResponse, path: string, search: string): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(res, 405, { error: 'method_not_allowed' }, { allow: 'GET, HEAD' });
    const [name = '', id, ...rest] = path.split('/');
    const resource = seedResource(name);
    if (resource === undefined || rest.length > 0) return json(res, 404, { error: 'not_found' });
    const credential = await authenticate(req);
    if (credential === undefined) {
      return json(
        res,
        401,
        { error: 'unauthenticated' },
        { 'www-authenticate': 'Bearer realm="sandbox", error="invalid_token"' },
      );
    }
    const denied = denial(credential, resource);
    if (denied !== undefined)
      return json(res, 403, { error: 'forbidden', reason: denied.reason, missing: denied.missing });
    if (id === undefined) {
      const query = readListQuery(search, resource);
      if ('invalid' in query) return json(res, 400, { error: 'invalid_parameter', parameter: query.invalid });
      return list(res, resource, credential, query);
    }
    const refused = readRecordQuery(search);
    if (refused !== undefined) return json(res, 400, { error: 'invalid_parameter', parameter: refused.invalid });
    single(res, resource, credential, id);
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
    const search = queryAt === -1 ? '' : target.slice(queryAt + 1);
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
    await answerApi(req, res, path, search);
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
      await closeServer(server, 0);
    },
  };
  return sandbox;
}
