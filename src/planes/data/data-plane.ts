/**
 * The data plane: the 26 cacheable reads, served by a lean `node:http` handler ahead of Express
 * (DESIGN §3, "where the time goes"). The request flow is written here once, in its order:
 *
 *   classify target (400 invalid_request) → OPTIONS → parse query (400 access_token)
 *   → authenticate (400 two headers, 401) → inbound limits (429)
 *   → resolve resource (404) → method (405) → authorise (403) → validate query (400)
 *   → read service (L1 → store → coalesced upstream fill)
 *   → respond: content coding (406 when none is acceptable), 304 on the selected ETag
 *
 * A hit on a token verified lately and a page held in this process runs all of it synchronously;
 * the first step that has to wait (verifying a token, asking Redis or the upstream) turns the
 * rest into the async path, which runs the very same steps.
 *
 * It returns `false` for requests that are not its own, which then go to the fallback plane.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessLists } from '../../auth/access-lists.js';
import type { Authenticated, Authenticator } from '../../auth/authenticate.js';
import { type AuthorizationPolicy, authorize } from '../../auth/authorize.js';
import type { Principal } from '../../auth/principal.js';
import { API_PREFIX, RESOURCES } from '../../catalog/resources.js';
import {
  ALLOWED_METHODS,
  InternalError,
  InvalidBearerRequestError,
  InvalidRequestError,
  MethodNotAllowedError,
  NotAcceptableError,
  NotFoundError,
  ProxyError,
  RateLimitedError,
} from '../../errors/proxy-error.js';
import type { InboundLimiter, LimitVerdict } from '../../limits/inbound.js';
import { ID_SEGMENT, loggedPath } from '../../observability/logged-path.js';
import type { RequestLog } from '../../observability/logger.js';
import type { LimitPolicy, Metrics } from '../../observability/metrics.js';
import { type ParsedQuery, createCanonicalMemo } from '../../request/memo.js';
import { type Route, resolveRoute } from '../../request/route.js';
import { classifyTarget } from '../../request/target.js';
import type { ReadOutcome, ReadService } from '../../cache/read-service.js';
import { gzipBody } from '../../cache/entry.js';
import { chooseCoding } from '../../http/content-coding.js';
import { etagMatches } from '../../http/conditional.js';
import { writeProblem } from '../../http/problem.js';
import { requestIdOf } from '../../http/request-id.js';

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
  const paths = route.kind === 'list' || route.kind === 'record' ? READ_PATHS.get(route.resource.name) : undefined;
  if (paths === undefined) return loggedPath(`${API_PREFIX}/${path}`);
  return route.kind === 'list' ? paths.list : paths.record;
}

interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
  readonly startedAt: number;
  readonly head: boolean;
  readonly path: string;
  resource: string | undefined;
  principal: Principal | undefined;
  /** The RateLimit fields, once the limits have decided (every answer after authentication). */
  limits: LimitVerdict | undefined;
}

function limitPolicyOf(policy: string): LimitPolicy {
  return policy === 'company' || policy === 'upstream' ? policy : 'credential';
}

/**
 * `Cache-Control` of an answer from a cache entry, for a freshness lifetime in seconds:
 * - `private`: one credential's answer (README "The cache"): a shared cache must not store it
 *   at all (RFC 9111 §5.2.2.7), whatever else the field says.
 * - `max-age`: the lifetime, with `Age` beside it (RFC 9111 §4.2.3; see the read service).
 * - `s-maxage` (the same value): what lets a client's own cache keep a page fetched with
 *   `Authorization`. RFC 9111 §3.5 names `public`, `s-maxage` and `must-revalidate` as the
 *   directives that allow it, and undici's private cache applies that rule to itself. `public`
 *   would invite shared caches. `must-revalidate` has the meaning we want (never reuse a stale copy
 *   unvalidated, §5.2.2.2), but http-cache-semantics 4.2+ (behind got, cacheable-request and
 *   make-fetch-happen) revalidates a `must-revalidate` response on every use even while fresh, so
 *   those clients would never reuse a page. `s-maxage` only speaks to shared caches, which
 *   `private` already shuts out: to a private cache it changes nothing but the §3.5 permission.
 *   Without must-revalidate a client may still use a stale copy when disconnected or when it asks
 *   for one (`max-stale`, §4.2.4): its own, explicit choice.
 * No RFC 5861 `stale-while-revalidate`/`stale-if-error`: the proxy already serves stale copies
 * itself (README "The cache"), and a client doing the same would add its window to the proxy's.
 * The few distinct lifetimes (one per policy) each get their string once.
 */
const cacheControlByLifetime = new Map<number, string>();
/** Lifetimes come from the policies; a bound all the same, should overrides change endlessly. */
const MAX_REMEMBERED_LIFETIMES = 64;
function privateCacheControl(lifetimeSeconds: number): string {
  let value = cacheControlByLifetime.get(lifetimeSeconds);
  if (value === undefined) {
    value = `private, max-age=${lifetimeSeconds}, s-maxage=${lifetimeSeconds}`;
    if (cacheControlByLifetime.size < MAX_REMEMBERED_LIFETIMES) cacheControlByLifetime.set(lifetimeSeconds, value);
  }
  return value;
}

export function createDataPlane(options: DataPlaneOptions): DataPlane {
  const { authenticator, limiter, lists, policy, reads, log, metrics } = options;
  const memo = createCanonicalMemo();

  function finish(ex: Exchange, status: number, errorCode: string | undefined, outcome: ReadOutcome | undefined): void {
    const durationMs = performance.now() - ex.startedAt;
    metrics?.request(ex.resource, status, outcome?.cacheResult, durationMs / 1000);
    log({
      requestId: ex.requestId,
      method: ex.req.method ?? '',
      path: ex.path,
      resource: ex.resource,
      status,
      errorCode,
      company: ex.principal?.company,
      subject: ex.principal?.subject,
      cache: outcome?.cacheResult,
      upstreamMs: outcome?.upstreamMs,
      durationMs,
    });
  }

  function limitHeaders(ex: Exchange): Record<string, string> {
    return ex.limits === undefined ? {} : { 'ratelimit-policy': ex.limits.policyHeader, ratelimit: ex.limits.rateLimitHeader };
  }

  function fail(ex: Exchange, error: ProxyError): void {
    if (error instanceof RateLimitedError) metrics?.rateLimited(limitPolicyOf(error.policy));
    writeProblem(ex.res, error, ex.requestId, { head: ex.head, headers: limitHeaders(ex) });
    finish(ex, error.status, error.code, undefined);
  }

  function respond(ex: Exchange, outcome: ReadOutcome): void {
    const headers: Record<string, string | number> = {
      'x-request-id': ex.requestId,
      'cache-status': outcome.cacheStatus,
      ...limitHeaders(ex),
    };
    let body = outcome.body;
    let etag = outcome.etag;
    let contentEncoding: string | undefined;
    // An answer made from a cache entry (a 200, or a record's 404) carries its freshness and is
    // negotiated; any other (an upstream error passed on, or a rare page fetched without an
    // entry) is the upstream's identity bytes, not kept.
    const fromEntry = outcome.maxAgeSeconds !== undefined;
    if (fromEntry) {
      const coding = chooseCoding(ex.req.headers['accept-encoding'], outcome.brotli !== undefined);
      if (coding === undefined) return fail(ex, new NotAcceptableError());
      // br: the stored bytes as they are; gzip: made once per page and process (README "Content coding").
      const coded = coding === 'br' ? outcome.brotli : coding === 'gzip' && etag !== undefined ? gzipBody(body, etag) : undefined;
      if (coded !== undefined) {
        body = coded.body;
        etag = coded.etag;
        contentEncoding = coded.coding;
      }
      headers['cache-control'] = privateCacheControl(outcome.maxAgeSeconds);
      if (outcome.ageSeconds !== undefined) headers.age = outcome.ageSeconds;
      // Every negotiated answer, identity too, varies with Accept-Encoding (RFC 9110 §12.5.5).
      headers.vary = 'Accept-Encoding, Authorization';
    } else {
      headers['cache-control'] = 'no-store';
      if (outcome.status === 200 || outcome.status === 404) headers.vary = 'Authorization';
    }
    if (etag !== undefined) headers.etag = etag;
    if (outcome.retryAfter !== undefined) headers['retry-after'] = outcome.retryAfter;
    // RFC 9110 §13.1.2: If-None-Match with the selected representation's validator → 304 without
    // a body. The 304 repeats Cache-Control, ETag, Vary and Age, which a client's cache uses to
    // freshen its copy (RFC 9111 §4.3.4), and no representation metadata such as Content-Type or
    // Content-Encoding (RFC 9110 §15.4.5).
    if (fromEntry && etag !== undefined && etagMatches(ex.req.headers['if-none-match'], etag)) {
      ex.res.writeHead(304, headers);
      ex.res.end();
      finish(ex, 304, undefined, outcome);
      return;
    }
    // The upstream's own 429, passed on (no stale copy to serve instead).
    if (outcome.status === 429) metrics?.rateLimited('upstream');
    headers['content-type'] = outcome.contentType;
    if (contentEncoding !== undefined) headers['content-encoding'] = contentEncoding;
    headers['content-length'] = body.length;
    ex.res.writeHead(outcome.status, headers);
    ex.res.end(ex.head ? undefined : body);
    finish(ex, outcome.status, undefined, outcome);
  }

  /** A defect, not an input: every input has a defined answer. Still never hang or crash. */
  function defect(ex: Exchange, error: unknown): void {
    options.onDefect?.(error);
    if (!ex.res.headersSent) fail(ex, new InternalError());
    else ex.res.destroy();
  }

  /**
   * Everything after authentication, in the flow's order. Returns a promise only when the read
   * service must run; a hit held in this process is answered synchronously.
   */
  function serveAuthenticated(ex: Exchange, route: Route, query: ParsedQuery, rawQuery: string, path: string, identity: Authenticated): Promise<void> | void {
    ex.principal = identity.principal;
    // The inbound limits: after 401, before 404/405/403/400 (DESIGN §3), on hits and misses alike.
    const verdict = limiter.decide(identity.principal);
    if (verdict instanceof Promise) return verdict.then((decided) => serveWithinLimits(ex, route, query, rawQuery, path, identity, decided));
    return serveWithinLimits(ex, route, query, rawQuery, path, identity, verdict);
  }

  function serveWithinLimits(
    ex: Exchange,
    route: Route,
    query: ParsedQuery,
    rawQuery: string,
    path: string,
    identity: Authenticated,
    verdict: LimitVerdict,
  ): Promise<void> | void {
    ex.limits = verdict;
    if (!verdict.allowed) return fail(ex, new RateLimitedError(verdict.retryAfterSeconds, verdict.refusedBy ?? 'credential'));
    const principal = identity.principal;
    if (route.kind === 'unknown' || route.kind === 'malformed') return fail(ex, new NotFoundError());
    const method = ex.req.method;
    if (method !== 'GET' && method !== 'HEAD') return fail(ex, new MethodNotAllowedError());
    const forbidden = authorize(principal, route.resource, policy, lists);
    if (forbidden !== undefined) return fail(ex, forbidden);
    const read = memo.read(route, path, rawQuery, query);
    if (read instanceof ProxyError) return fail(ex, read);
    const request = { read, principal, token: identity.token, requestId: ex.requestId };
    const hot = reads.serveHot(request);
    if (hot !== undefined) return respond(ex, hot);
    return reads.serve(request).then((outcome) => (outcome instanceof ProxyError ? fail(ex, outcome) : respond(ex, outcome)));
  }

  async function authenticateThenServe(ex: Exchange, route: Route, query: ParsedQuery, rawQuery: string, path: string): Promise<void> {
    const identity = await authenticator.authenticate(ex.req.headersDistinct.authorization);
    if (identity instanceof ProxyError) return fail(ex, identity);
    await serveAuthenticated(ex, route, query, rawQuery, path, identity);
  }

  return function dataPlane(req, res) {
    const url = req.url ?? '';
    const target = classifyTarget(url);
    if (target.kind === 'other') return false;
    const route = target.kind === 'api' ? resolveRoute(target.path) : undefined;
    if (route?.kind === 'unknown' && options.yieldUnknownResources) return false;
    const ex: Exchange = {
      req,
      res,
      requestId: requestIdOf(req),
      startedAt: performance.now(),
      head: req.method === 'HEAD',
      path: route === undefined ? INVALID_TARGET_PATH : loggedPathOf(route, target.kind === 'api' ? target.path : ''),
      resource: route !== undefined && route.kind !== 'unknown' ? route.resource.name : undefined,
      principal: undefined,
      limits: undefined,
    };
    if (target.kind === 'invalid' || route === undefined) {
      fail(ex, new InvalidRequestError('The request target must be a path on this server.'));
      return true;
    }
    if (req.method === 'OPTIONS') {
      if (route.kind === 'unknown' || route.kind === 'malformed') {
        fail(ex, new NotFoundError());
      } else {
        res.writeHead(204, { allow: ALLOWED_METHODS, 'x-request-id': ex.requestId });
        res.end();
        finish(ex, 204, undefined, undefined);
      }
      return true;
    }
    const rawQuery = target.kind === 'api' ? target.rawQuery : '';
    const path = target.kind === 'api' ? target.path : '';
    const query = memo.parse(rawQuery);
    if (query.hasAccessToken) {
      fail(ex, new InvalidBearerRequestError('Tokens are accepted only in the Authorization header.'));
      return true;
    }
    try {
      // The hit path: a token verified lately, then everything synchronously up to the answer.
      const cached = authenticator.authenticateCached(req.headersDistinct.authorization);
      const pending =
        cached === undefined ? authenticateThenServe(ex, route, query, rawQuery, path) : serveAuthenticated(ex, route, query, rawQuery, path, cached);
      if (pending instanceof Promise) pending.catch((error: unknown) => defect(ex, error));
    } catch (error) {
      defect(ex, error);
    }
    return true;
  };
}
