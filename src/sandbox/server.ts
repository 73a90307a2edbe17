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
 * - the answer: its refusals in the seed's order, company scoping (seed §5.2) and keyset pages
 *   (seed §4: `api.ts`).
 *
 * Bodies are small JSON objects (`{"error": …}`; the seed leaves their shape open: `json.ts`). It
 * answers 429 above its rate (`rate-limit.ts`) and, when `control` is on, exposes under `/__sandbox/`
 * (`control.ts`) a fault switch (`faults.ts`, `fault-answer.ts`), the count of requests it served
 * (`arrivals.ts`), and the trace headers they carried (`traceparent`, `tracestate`, `X-Request-Id`:
 * how tests see what reaches the upstream, `request-log.ts`). Refusing connections is `listener.ts`.
 * Pages and records carry validators and conditional requests get 304s, switchable
 * (`validators.ts`). In live mode (`live.ts`, off by default) records change at configured rates,
 * each change logged with its time (`change-log.ts`). This file wires them together and owns the
 * server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type PageChanges, SandboxApi } from './api.js';
import { ArrivalRecorder, type SandboxStats } from './arrivals.js';
import { ChangeWebhook, type WebhookTarget } from './change-webhook.js';
import { CONTROL_PREFIX, type ControlTargets, handleControl } from './control.js';
import { credentialChecker, type SandboxClaimNames, type SandboxKeys } from './credentials.js';
import { type Dataset, generateDataset } from './dataset.js';
import { answerFault } from './fault-answer.js';
import { FaultSwitch } from './faults.js';
import { json } from './json.js';
import { Listener } from './listener.js';
import { LiveDataset } from './live.js';
import type { ChangeRule } from './live-rules.js';
import { RateLimitSwitch } from './rate-limit.js';
import { type ReceivedRequest, RequestLog } from './request-log.js';
import { API_PREFIX } from './resources.js';
import { ALL_VALIDATORS, Representations, type ValidatorSettings } from './validators.js';

export type { SandboxStats } from './arrivals.js';
export type { ReceivedRequest } from './request-log.js';
export type { ValidatorSettings } from './validators.js';

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
  /** Which validators pages carry and which conditional requests are evaluated (default: both). */
  readonly validators?: ValidatorSettings;
  /** Live mode from the start (live.ts): records change by these rules. Off by default. */
  readonly live?: readonly ChangeRule[];
  /** Where live mode sends each change it makes (change-webhook.ts): the proxy's invalidation endpoint. */
  readonly webhook?: WebhookTarget;
}

export interface Sandbox {
  readonly server: Server;
  /** The records as they are now (live mode changes them in place). */
  readonly dataset: Dataset;
  /** Live mode: its rules, its changes and their log. */
  readonly live: LiveDataset;
  readonly faults: FaultSwitch;
  /** Listens and resolves the base URL (`http://127.0.0.1:<port>`). */
  listen(port?: number, host?: string): Promise<string>;
  readonly url: string;
  stats(): SandboxStats;
  /** The last API requests' trace headers (control on; else always empty). */
  received(): ReceivedRequest[];
  resetStats(): void;
  /** Switches the validators pages carry, and the conditional requests evaluated with them. */
  setValidators(settings: ValidatorSettings): void;
  /**
   * Stops listening, so that connections are refused, for `ms` or until `accept()`; then listens
   * on the same port again. Resolves once it listens again.
   */
  refuse(ms: number): Promise<void>;
  /** Ends a refusal early. */
  accept(): void;
  close(): Promise<void>;
}

/** What an API request passes through before its answer. */
interface ApiRooms {
  readonly arrivals: ArrivalRecorder;
  /** Only with `control` on. */
  readonly requests: RequestLog | undefined;
  readonly rateLimit: RateLimitSwitch;
  readonly faults: FaultSwitch;
  readonly api: SandboxApi;
}

/** The bytes each connection had sent when its last answer was counted. */
const countedBytes = new WeakMap<Socket, number>();

/**
 * Counts an answer just given (`end` called): its status, its body's bytes (as its Content-Length
 * promised; none for HEAD and 304), and its bytes on the wire, read from the connection at once (a
 * socket's count includes what it still buffers), so the figures are there before the client has
 * the answer.
 */
function countAnswer(arrivals: ArrivalRecorder, req: IncomingMessage, res: ServerResponse): void {
  const socket = req.socket;
  const written = socket.bytesWritten;
  const before = countedBytes.get(socket) ?? 0;
  countedBytes.set(socket, written);
  const length = Number(res.getHeader('content-length') ?? 0);
  const body = res.statusCode === 304 || req.method === 'HEAD' || !Number.isFinite(length) ? 0 : length;
  arrivals.answered(res.statusCode, body, written - before);
}

/** Counts the request, then its rate limit, then any fault, then the answer, then what was sent. */
async function handleApi(rooms: ApiRooms, req: IncomingMessage, res: ServerResponse, target: string): Promise<void> {
  rooms.arrivals.arrived(
    target,
    req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined,
  );
  rooms.requests?.record(req, target);
  res.on('close', () => rooms.arrivals.ended());
  await answerApi(rooms, req, res, target);
  if (res.writableEnded) countAnswer(rooms.arrivals, req, res);
}

/** The answer: a 429 above the rate, a fault when one is set, else the API's own. */
async function answerApi(rooms: ApiRooms, req: IncomingMessage, res: ServerResponse, target: string): Promise<void> {
  if (rooms.rateLimit.refuses(rooms.arrivals.startsThisSecond)) {
    rooms.arrivals.rateLimited();
    return json(res, 429, { error: 'rate_limited' }, { 'retry-after': '1' });
  }
  const queryAt = target.indexOf('?');
  const path = (queryAt === -1 ? target : target.slice(0, queryAt)).slice(API_PREFIX.length + 1);
  const search = queryAt === -1 ? '' : target.slice(queryAt + 1);
  if (await answerFault(res, rooms.faults.take(path.split('/')[0]))) return;
  await rooms.api.answer(req, res, path, search);
}

/** A handler that failed answers 500, or drops the connection when its answer had begun. */
function settle(res: ServerResponse, promise: Promise<void>): void {
  promise.catch(() => {
    if (!res.headersSent) json(res, 500, { error: 'internal' });
    else res.destroy();
  });
}

/** The dataset, changing in live mode, and sending its changes to a webhook when one is given. */
function liveDataset(options: SandboxOptions): LiveDataset {
  const live = new LiveDataset(options.seed === undefined ? generateDataset() : generateDataset(options.seed));
  if (options.webhook !== undefined) live.webhook = new ChangeWebhook(options.webhook);
  if (options.live !== undefined) live.start(options.live, options.seed);
  return live;
}

/**
 * In live mode a page is dated as a system of record dates it: by the latest change of what it
 * shows (its records' `updated_at`), or of a record that left it (the change log).
 */
function liveDating(live: LiveDataset): PageChanges {
  return {
    list: (company, resource, query, page) =>
      live.startedAt === undefined
        ? undefined
        : Math.max(page.shownAt, live.log.listChangedAt(company, resource, query, page.lastId, page.hasMore) ?? 0),
    record: (company, resource, record) =>
      live.startedAt === undefined
        ? undefined
        : Math.max(record.shownAt, live.log.recordChangedAt(company, resource, record.id) ?? 0),
  };
}

export function createSandbox(options: SandboxOptions): Sandbox {
  const live = liveDataset(options);
  const checkToken = credentialChecker({
    keys: options.keys,
    issuer: options.issuer,
    audience: options.audience,
    claims: options.claims,
  });
  const control = options.control === true;
  const arrivals = new ArrivalRecorder();
  const requests = new RequestLog();
  const faults = new FaultSwitch();
  const rateLimit = new RateLimitSwitch(options.rateLimitPerSecond ?? 0);
  const representations = new Representations(options.validators ?? ALL_VALIDATORS);
  const rooms: ApiRooms = {
    arrivals,
    requests: control ? requests : undefined,
    rateLimit,
    faults,
    api: new SandboxApi(live.dataset, checkToken, representations, liveDating(live)),
  };
  const server = createServer((req, res) => {
    const target = req.url ?? '/';
    if (control && target.startsWith(CONTROL_PREFIX))
      return settle(res, handleControl(req, res, target.slice(CONTROL_PREFIX.length), targets));
    if (target.startsWith(`${API_PREFIX}/`)) return settle(res, handleApi(rooms, req, res, target));
    json(res, 404, { error: 'not_found' });
  });
  server.keepAliveTimeout = 65_000;
  const listener = new Listener(server);
  const targets: ControlTargets = {
    arrivals,
    requests,
    faults,
    rateLimit,
    representations,
    live,
    refuse: (ms) => listener.refuse(ms),
  };

  return {
    server,
    dataset: live.dataset,
    live,
    faults,
    listen: (port = 0, host = '127.0.0.1') => listener.listen(port, host),
    get url() {
      return listener.url;
    },
    stats: () => arrivals.snapshot(),
    received: () => requests.list(),
    resetStats() {
      arrivals.reset();
      requests.clear();
    },
    setValidators: (settings) => representations.set(settings),
    refuse: (ms) => listener.refuse(ms),
    accept: () => listener.accept(),
    close() {
      live.stop();
      live.webhook?.close();
      return listener.close();
    },
  };
}
