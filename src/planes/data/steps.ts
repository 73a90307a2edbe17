/**
 * The request flow of the data plane, written down once as named steps in their order (README,
 * "How a request flows"; the order of the refusals is the contract's: request-level 400s, then 401,
 * then 429, then 404, 405, 403, 400):
 *
 *   target (400 invalid_request) → OPTIONS (204) → query (400 access_token)
 *   → authenticate (400 two headers, 401) → operator state (503) → inbound limits (429)
 *   → resource (404) → method (405) → authorize (403) → validate query (400)
 *   → read (L1 → store → coalesced origin fill) → respond (406, 304, the read's answer)
 *
 * Each step is a function over one `Exchange` and the plane's parts. It answers the request (and
 * returns `true`: the flow stops), or records its verdict on the exchange and returns `false` (the
 * next step runs) — at once, or as a promise when it must wait for a token's verification, Redis or
 * the origin. `runSteps` runs the list; the hit benchmark (bench/hit-breakdown.ts) times this same
 * list, step by step.
 */
import type { AccessLists } from '../../auth/access-lists.js';
import type { Authenticated, Authenticator } from '../../auth/authenticate.js';
import { type AuthorizationPolicy, authorize } from '../../auth/authorize.js';
import type { ReadService } from '../../cache/read/read-service.js';
import {
  ALLOWED_METHODS,
  InvalidBearerRequestError,
  InvalidRequestError,
  MethodNotAllowedError,
  NotFoundError,
  OperatorStateUnavailableError,
  ProxyError,
  RateLimitedError,
} from '../../errors/proxy-error.js';
import { fieldLines, fieldValue } from '../../http/raw-headers.js';
import type { InboundLimiter } from '../../limits/inbound.js';
import type { LimitVerdict } from '../../limits/limit-verdict.js';
import { clientTraceFields } from '../../observability/trace-context.js';
import type { CanonicalMemo } from '../../request/memo.js';
import { type AnswerRecorders, fail, finish, respond } from './answers.js';
import { type Exchange, type ExchangeAt, reached, type Stage } from './exchange.js';

/** What the steps work with: the domains, and where answers are recorded. */
export interface DataPlaneParts extends AnswerRecorders {
  readonly authenticator: Authenticator;
  readonly limiter: InboundLimiter;
  readonly lists: AccessLists;
  readonly policy: AuthorizationPolicy;
  readonly reads: ReadService;
  readonly memo: CanonicalMemo;
}

/** `true`: the request is answered, the flow stops; `false`: the next step runs. */
export type StepResult = boolean | Promise<boolean>;
export type Step = (ex: Exchange, parts: DataPlaneParts) => StepResult;

/**
 * A step that needs the exchange at `stage`: the flow's one guard runs first. A step run before its
 * stage is a defect of the flow's order, never an input (answered 500, `defect` in data-plane.ts).
 */
function at<S extends Stage>(stage: S, step: (ex: ExchangeAt<S>, parts: DataPlaneParts) => StepResult): Step {
  return (ex, parts) => {
    if (!reached(ex, stage)) throw new TypeError(`a step that needs the stage "${stage}" ran before it`);
    return step(ex, parts);
  };
}

/** A path on this server, not an absolute-form or network-path target (a host named by a client). */
export function checkTarget(ex: Exchange, parts: DataPlaneParts): StepResult {
  if (ex.target !== undefined && ex.route !== undefined) return false;
  return fail(ex, parts, new InvalidRequestError('The request target must be a path on this server.'));
}

/** `OPTIONS` is answered before any credential is asked for (a CORS preflight carries none). */
export function answerOptions(ex: Exchange, parts: DataPlaneParts): StepResult {
  if (ex.req.method !== 'OPTIONS') return false;
  if (ex.route?.kind !== 'list' && ex.route?.kind !== 'record') return fail(ex, parts, new NotFoundError());
  ex.res.writeHead(204, { allow: ALLOWED_METHODS, 'x-request-id': ex.requestId });
  ex.res.end();
  finish(ex, parts, 204, undefined, undefined);
  return true;
}

/** The query's pairs; a token in the query is refused before it could be used (RFC 6750 §2.3). */
export function parseQuery(ex: Exchange, parts: DataPlaneParts): StepResult {
  const query = parts.memo.parse(ex.req.url ?? '', ex.target?.rawQuery ?? '');
  if (query.hasAccessToken)
    return fail(ex, parts, new InvalidBearerRequestError('Tokens are accepted only in the Authorization header.'));
  ex.query = query;
  return false;
}

function authenticated(ex: Exchange, parts: DataPlaneParts, identity: Authenticated | ProxyError): boolean {
  if (identity instanceof ProxyError) return fail(ex, parts, identity);
  ex.identity = identity;
  return false;
}

/** The bearer token: from the cache of tokens verified lately at once, else verified (jose). */
export function authenticate(ex: Exchange, parts: DataPlaneParts): StepResult {
  const header = fieldLines(ex.req, 'authorization');
  const cached = parts.authenticator.authenticateCached(header, ex.req.socket);
  if (cached !== undefined) return authenticated(ex, parts, cached);
  return parts.authenticator.authenticate(header).then((identity) => authenticated(ex, parts, identity));
}

/**
 * A replica that has not read the operator state since it started cannot tell whether this
 * credential is revoked or its company blocked: 503 rather than fail open.
 */
export function requireKnownLists(ex: Exchange, parts: DataPlaneParts): StepResult {
  return parts.lists.areKnown() ? false : fail(ex, parts, new OperatorStateUnavailableError());
}

function limited(ex: Exchange, parts: DataPlaneParts, verdict: LimitVerdict): boolean {
  ex.limits = verdict;
  if (verdict.allowed) return false;
  return fail(ex, parts, new RateLimitedError(verdict.retryAfterSeconds, verdict.refusedBy ?? 'credential'));
}

/** The inbound limits, on hits and misses alike: after 401, before 404/405/403/400. */
export const applyInboundLimits = at('authenticated', (ex, parts) => {
  const verdict = parts.limiter.decide(ex.identity.principal);
  return verdict instanceof Promise
    ? verdict.then((decided) => limited(ex, parts, decided))
    : limited(ex, parts, verdict);
});

/**
 * An unknown resource or a malformed record id: 404 without asking the origin. The route was
 * resolved when the exchange opened (its log line and span name it); here it must name a read.
 */
export function requireReadRoute(ex: Exchange, parts: DataPlaneParts): StepResult {
  return reached(ex, 'read route') ? false : fail(ex, parts, new NotFoundError());
}

/** Reads only: GET and HEAD (OPTIONS was answered above). */
export function checkMethod(ex: Exchange, parts: DataPlaneParts): StepResult {
  const method = ex.req.method;
  return method === 'GET' || method === 'HEAD' ? false : fail(ex, parts, new MethodNotAllowedError());
}

/** The resource's permissions, scope, modules and the blocks (403). */
export const authorizeRead = at('read route', (ex, parts) => {
  const forbidden = authorize(ex.identity.principal, ex.route.resource, parts.policy, parts.lists);
  return forbidden === undefined ? false : fail(ex, parts, forbidden);
});

/** The canonical read: the resource's parameters only, each valid, in one spelling (400). */
export const validateQuery = at('read route', (ex, parts) => {
  const read = parts.memo.read(ex.route, ex.query);
  if (read instanceof ProxyError) return fail(ex, parts, read);
  ex.read = read;
  return false;
});

/** The cache: a page held in this process at once; else the store, or one fill from the origin. */
export const readThroughCache = at('validated', (ex, parts) => {
  const { read, identity } = ex;
  const request = {
    read,
    principal: identity.principal,
    token: identity.token,
    requestId: ex.requestId,
    trace: ex.trace,
  };
  const hot = parts.reads.serveHot(request);
  if (hot !== undefined) {
    ex.outcome = hot;
    return false;
  }
  // Tracing off: the client's trace context goes upstream as it came (read only past the L1).
  const clientTrace =
    ex.trace === undefined
      ? clientTraceFields(fieldValue(ex.req, 'traceparent'), fieldValue(ex.req, 'tracestate'))
      : undefined;
  return parts.reads.serve(clientTrace === undefined ? request : { ...request, clientTrace }).then((outcome) => {
    if (outcome instanceof ProxyError) return fail(ex, parts, outcome);
    ex.outcome = outcome;
    return false;
  });
});

/** The read's answer: its content coding (406), a 304 on its validator, or the page. */
export const respondWithRead = at('read', (ex, parts) => respond(ex, parts, ex.outcome));

/** The flow, in its order. */
export const REQUEST_FLOW: ReadonlyArray<readonly [name: string, step: Step]> = [
  ['target', checkTarget],
  ['options', answerOptions],
  ['query', parseQuery],
  ['authenticate', authenticate],
  ['operator state', requireKnownLists],
  ['inbound limits', applyInboundLimits],
  ['resource', requireReadRoute],
  ['method', checkMethod],
  ['authorize', authorizeRead],
  ['validate query', validateQuery],
  ['read', readThroughCache],
  ['respond', respondWithRead],
];

/**
 * Runs the steps from `from` on: synchronously for as long as every step answers at once (a hit on
 * a token verified lately and a page held in this process never leaves the call), then through
 * the first promise a step returns, resuming with the next step (the pattern of fastify's hook
 * runner). Returns a promise only when a step did.
 */
export function runSteps(
  ex: Exchange,
  parts: DataPlaneParts,
  steps: ReadonlyArray<readonly [string, Step]> = REQUEST_FLOW,
  from = 0,
): void | Promise<void> {
  for (let i = from; i < steps.length; i++) {
    const step = steps[i];
    if (step === undefined) return;
    const result = step[1](ex, parts);
    if (result === true) return;
    if (result !== false) return result.then((answered) => (answered ? undefined : runSteps(ex, parts, steps, i + 1)));
  }
}
