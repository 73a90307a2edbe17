/**
 * How the data plane answers: a read's outcome (content coding, freshness headers, 304), a problem,
 * and the request's one log line and metrics, written once for every answer.
 */

import { gzipBody } from '../../cache/entry/entry.js';
import type { ReadOutcome } from '../../cache/read/read-outcome.js';
import { NotAcceptableError, type ProxyError, RateLimitedError } from '../../errors/proxy-error.js';
import { etagMatches } from '../../http/conditional.js';
import { chooseCoding } from '../../http/content-coding.js';
import { writeProblem } from '../../http/problem.js';
import { fieldValue } from '../../http/raw-headers.js';
import type { RequestLog } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import type { Exchange } from './exchange.js';

/** Where the answers are recorded. */
export interface AnswerRecorders {
  readonly log: RequestLog;
  readonly metrics?: Pick<Metrics, 'request' | 'rateLimited'> | undefined;
}

/** The request's log line, metrics and span, once it is answered. */
export function finish(
  ex: Exchange,
  recorders: AnswerRecorders,
  status: number,
  errorCode: string | undefined,
  outcome: ReadOutcome | undefined,
): void {
  const durationMs = performance.now() - ex.startedAt;
  ex.trace?.end(status, errorCode, outcome?.cacheResult);
  recorders.metrics?.request(
    ex.resource,
    status,
    outcome?.cacheResult,
    durationMs / 1000,
    ex.identity?.principal.company,
  );
  recorders.log({
    requestId: ex.requestId,
    method: ex.req.method ?? '',
    path: ex.loggedPath,
    resource: ex.resource,
    status,
    errorCode,
    company: ex.identity?.principal.company,
    subject: ex.identity?.principal.subject,
    cache: outcome?.cacheResult,
    upstreamMs: outcome?.upstreamMs,
    durationMs,
  });
}

function limitHeaders(ex: Exchange): Record<string, string> {
  return ex.limits === undefined
    ? {}
    : { 'ratelimit-policy': ex.limits.policyHeader, ratelimit: ex.limits.rateLimitHeader };
}

/** Answers with a problem (RFC 9457); always `true`: the request is answered. */
export function fail(ex: Exchange, recorders: AnswerRecorders, error: ProxyError): true {
  if (error instanceof RateLimitedError) recorders.metrics?.rateLimited(error.policy);
  writeProblem(ex.res, error, ex.requestId, { head: ex.head, headers: limitHeaders(ex) });
  finish(ex, recorders, error.status, error.code, undefined);
  return true;
}

/**
 * `Cache-Control` of an answer from a cache entry, for a freshness lifetime in seconds:
 * - `private`: one credential's answer (docs/cache.md): a shared cache must not store it
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
 * itself (docs/cache.md), and a client doing the same would add its window to the proxy's.
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

/**
 * The fields of an answer from a stored body that are the same on every hit: made once
 * per body sent and kept beside it (identity, br and gzip are each a Buffer the entry holds), so a
 * hit only adds the fields of its own request. A flat list of names and values, which
 * `writeHead` takes as it is. `notModified` is the 304's share: the validator and `Vary`, and no
 * representation metadata (RFC 9110 §15.4.5).
 */
interface StoredHead {
  readonly contentType: string;
  readonly etag: string | undefined;
  readonly full: readonly string[];
  readonly notModified: readonly string[];
}
const headsByBody = new WeakMap<Buffer, StoredHead>();

/** Every negotiated answer, identity too, varies with Accept-Encoding (RFC 9110 §12.5.5). */
const NEGOTIATED_VARY = 'Accept-Encoding, Authorization';

function storedHead(
  body: Buffer,
  contentType: string,
  etag: string | undefined,
  coding: string | undefined,
): StoredHead {
  const known = headsByBody.get(body);
  // A body belongs to one entry; the check keeps a head from outliving a change of either field.
  if (known !== undefined && known.contentType === contentType && known.etag === etag) return known;
  const validator = etag === undefined ? [] : ['etag', etag];
  const head: StoredHead = {
    contentType,
    etag,
    full: [
      'content-type',
      contentType,
      ...(coding === undefined ? [] : ['content-encoding', coding]),
      'content-length',
      String(body.length),
      ...validator,
      'vary',
      NEGOTIATED_VARY,
    ],
    notModified: [...validator, 'vary', NEGOTIATED_VARY],
  };
  headsByBody.set(body, head);
  return head;
}

/** The fields of this request's answer from an entry: its id, cache status, freshness and limits. */
function perRequestFields(ex: Exchange, outcome: ReadOutcome, lifetimeSeconds: number): string[] {
  const fields = [
    'x-request-id',
    ex.requestId,
    'cache-status',
    outcome.cacheStatus,
    'cache-control',
    privateCacheControl(lifetimeSeconds),
  ];
  if (outcome.ageSeconds !== undefined) fields.push('age', String(outcome.ageSeconds));
  if (ex.limits !== undefined)
    fields.push('ratelimit-policy', ex.limits.policyHeader, 'ratelimit', ex.limits.rateLimitHeader);
  return fields;
}

/** Answers with a read's outcome; always `true`. */
export function respond(ex: Exchange, recorders: AnswerRecorders, outcome: ReadOutcome): true {
  // An answer made from a cache entry (a 200, or a record's 404) carries its freshness and is
  // negotiated; any other (an upstream error passed on, or a rare page fetched without an
  // entry) is the upstream's identity bytes, not kept.
  return outcome.maxAgeSeconds === undefined
    ? respondPassedOn(ex, recorders, outcome)
    : respondFromEntry(ex, recorders, outcome, outcome.maxAgeSeconds);
}

function respondFromEntry(
  ex: Exchange,
  recorders: AnswerRecorders,
  outcome: ReadOutcome,
  lifetimeSeconds: number,
): true {
  const coding = chooseCoding(fieldValue(ex.req, 'accept-encoding'), outcome.brotli !== undefined);
  if (coding === undefined) return fail(ex, recorders, new NotAcceptableError());
  // br: the stored bytes as they are; gzip: made once per page and process (docs/clients.md#content-coding).
  const coded =
    coding === 'br'
      ? outcome.brotli
      : coding === 'gzip' && outcome.etag !== undefined
        ? gzipBody(outcome.body, outcome.etag)
        : undefined;
  const body = coded?.body ?? outcome.body;
  const etag = coded?.etag ?? outcome.etag;
  const head = storedHead(body, outcome.contentType, etag, coded?.coding);
  const fields = perRequestFields(ex, outcome, lifetimeSeconds);
  // RFC 9110 §13.1.2: If-None-Match with the selected representation's validator → 304 without
  // a body. The 304 repeats Cache-Control, ETag, Vary and Age, which a client's cache uses to
  // freshen its copy (RFC 9111 §4.3.4).
  if (etag !== undefined && etagMatches(fieldValue(ex.req, 'if-none-match'), etag)) {
    for (const field of head.notModified) fields.push(field);
    ex.res.writeHead(304, fields);
    ex.res.end();
    finish(ex, recorders, 304, undefined, outcome);
    return true;
  }
  for (const field of head.full) fields.push(field);
  ex.res.writeHead(outcome.status, fields);
  ex.res.end(ex.head ? undefined : body);
  finish(ex, recorders, outcome.status, undefined, outcome);
  return true;
}

/** An answer not made from an entry: the upstream's identity bytes, never to be stored by a client. */
function respondPassedOn(ex: Exchange, recorders: AnswerRecorders, outcome: ReadOutcome): true {
  const headers: Record<string, string | number> = {
    'x-request-id': ex.requestId,
    'cache-status': outcome.cacheStatus,
    ...limitHeaders(ex),
    'cache-control': 'no-store',
  };
  if (outcome.status === 200 || outcome.status === 404) headers.vary = 'Authorization';
  if (outcome.etag !== undefined) headers.etag = outcome.etag;
  if (outcome.retryAfter !== undefined) headers['retry-after'] = outcome.retryAfter;
  // The upstream's own 429, passed on (no stale copy to serve instead).
  if (outcome.status === 429) recorders.metrics?.rateLimited('upstream');
  headers['content-type'] = outcome.contentType;
  headers['content-length'] = outcome.body.length;
  ex.res.writeHead(outcome.status, headers);
  ex.res.end(ex.head ? undefined : outcome.body);
  finish(ex, recorders, outcome.status, undefined, outcome);
  return true;
}
