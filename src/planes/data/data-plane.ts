/**
 * The data plane: the 26 cacheable reads, served by a lean `node:http` handler ahead of Express
 * (README, "How a request flows": Express alone costs more than a whole cache hit). It claims the
 * requests that are its own — every target under the API prefix, and anything that is not a path
 * on this server — and runs the request flow on them (steps.ts); the others (`false`) go to the
 * fallback plane.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessLists } from '../../auth/access-lists.js';
import type { Authenticator } from '../../auth/authenticate.js';
import type { AuthorizationPolicy } from '../../auth/authorize.js';
import type { ReadService } from '../../cache/read/read-service.js';
import { API_PREFIX, RESOURCES } from '../../catalog/resources.js';
import { InternalError } from '../../errors/proxy-error.js';
import { fieldValue } from '../../http/raw-headers.js';
import { clientRequestId, newRequestId } from '../../http/request-id.js';
import type { InboundLimiter } from '../../limits/inbound.js';
import { ID_SEGMENT, loggedPath } from '../../observability/logged-path.js';
import type { RequestLog } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import type { Tracing } from '../../observability/tracing.js';
import { createCanonicalMemo } from '../../request/memo.js';
import { type Route, resolveRoute } from '../../request/route.js';
import { classifyTarget } from '../../request/target.js';
import { fail } from './answers.js';
import type { Exchange } from './exchange.js';
import { type DataPlaneParts, runSteps } from './steps.js';

export interface DataPlaneOptions {
  readonly authenticator: Authenticator;
  readonly limiter: InboundLimiter;
  readonly lists: AccessLists;
  readonly policy: AuthorizationPolicy;
  readonly reads: ReadService;
  readonly log: RequestLog;
  readonly metrics?: Pick<Metrics, 'request' | 'rateLimited'>;
  /** With the pass-through on, paths under the prefix that name no resource go to the upstream. */
  readonly yieldUnknownResources: boolean;
  /** Told of every defect (an exception no input should cause), for the logs. */
  readonly onDefect?: (error: unknown) => void;
  /** OpenTelemetry tracing (docs/operations.md#tracing); `undefined`: off, and nothing is done for it. */
  readonly tracing?: Tracing | undefined;
}

export type DataPlane = (req: IncomingMessage, res: ServerResponse) => boolean;

/** Logged for a target that is not a path (absolute-form, `//host`): it names a host, or anything. */
const INVALID_TARGET_PATH = '(invalid target)';

/**
 * The reads' log paths, one pair per resource, made once: a read's line never carries client text
 * (the record id is `{id}`). Anything else under the prefix is a 404, logged word by word.
 */
const READ_PATHS: ReadonlyMap<string, { readonly list: string; readonly record: string }> = new Map(
  RESOURCES.map((resource) => {
    const list = `${API_PREFIX}/${resource.name}`;
    return [resource.name, { list, record: `${list}/${ID_SEGMENT}` }];
  }),
);

function loggedPathOf(route: Route, path: string): string {
  return templateOf(route) ?? loggedPath(`${API_PREFIX}/${path}`);
}

/** A read's route template (`…/receipts`, `…/receipts/{id}`): its log path and its span's `http.route`. */
function templateOf(route: Route | undefined): string | undefined {
  if (route?.kind !== 'list' && route?.kind !== 'record') return undefined;
  const paths = READ_PATHS.get(route.resource.name);
  return route.kind === 'list' ? paths?.list : paths?.record;
}

/** A defect, not an input: every input has a defined answer. Still never hang or crash. */
function defect(
  ex: Exchange,
  parts: DataPlaneParts,
  error: unknown,
  onDefect: ((error: unknown) => void) | undefined,
): void {
  onDefect?.(error);
  if (!ex.res.headersSent) fail(ex, parts, new InternalError());
  else {
    ex.res.destroy();
    // Ended already if the answer was finished; else it ends here, as the 500 it became.
    ex.trace?.end(500, 'internal_error', undefined);
  }
}

/**
 * The exchange of a request the data plane takes (steps.ts), or `undefined` when the request is
 * not its own and goes to the fallback plane. Exported for the hit benchmark, which times this
 * and each step apart (bench/hit-breakdown.ts).
 */
export function openExchange(
  req: IncomingMessage,
  res: ServerResponse,
  yieldUnknownResources: boolean,
  tracing?: Tracing | undefined,
): Exchange | undefined {
  const target = classifyTarget(req.url ?? '');
  if (target.kind === 'other') return undefined;
  const api = target.kind === 'api' ? target : undefined;
  const route = api === undefined ? undefined : resolveRoute(api.path);
  if (route?.kind === 'unknown' && yieldUnknownResources) return undefined;
  // The exchange holds the id: nothing else asks for it while the data plane has the request.
  const requestId = clientRequestId(req) ?? newRequestId();
  const resource = route !== undefined && route.kind !== 'unknown' ? route.resource.name : undefined;
  return {
    req,
    res,
    requestId,
    startedAt: performance.now(),
    head: req.method === 'HEAD',
    target: api === undefined ? undefined : { path: api.path, rawQuery: api.rawQuery },
    route,
    loggedPath: route === undefined ? INVALID_TARGET_PATH : loggedPathOf(route, api?.path ?? ''),
    resource,
    // Checked once per request; off, nothing else is done for tracing (no span, no header read).
    trace:
      tracing === undefined
        ? undefined
        : tracing.startRequest({
            method: req.method ?? 'GET',
            route: templateOf(route),
            resource,
            requestId,
            traceparent: fieldValue(req, 'traceparent'),
            tracestate: fieldValue(req, 'tracestate'),
          }),
    query: undefined,
    identity: undefined,
    limits: undefined,
    read: undefined,
    outcome: undefined,
  };
}

export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const parts: DataPlaneParts = {
    authenticator: options.authenticator,
    limiter: options.limiter,
    lists: options.lists,
    policy: options.policy,
    reads: options.reads,
    memo: createCanonicalMemo(),
    log: options.log,
    metrics: options.metrics,
  };

  const tracing = options.tracing;

  return function dataPlane(req, res) {
    const ex = openExchange(req, res, options.yieldUnknownResources, tracing);
    if (ex === undefined) return false;
    try {
      const pending = runSteps(ex, parts);
      if (pending !== undefined) pending.catch((error: unknown) => defect(ex, parts, error, options.onDefect));
    } catch (error) {
      defect(ex, parts, error, options.onDefect);
    }
    return true;
  };
}
