/**
 * The port the cache fetches through: what it asks the origin (the system of record), and what it
 * is told back. The cache owns these types; the upstream module implements them
 * (`src/upstream/fetch-read.ts`), guarded by the limits (`src/upstream/guarded-fetch.ts`).
 */
import type { Principal } from '../../auth/principal.js';
import type { ProxyError } from '../../errors/proxy-error.js';
import type { TraceFields } from '../../observability/trace-context.js';
import type { RequestTrace } from '../../observability/tracing.js';
import type { CanonicalRead } from '../../request/canonical-read.js';
import type { PageParts } from '../../request/next-page.js';
import type { PrefetchStanding } from '../prefetch/prefetch-standing.js';

/** One canonical read, for one credential. */
export interface ReadRequest {
  readonly read: CanonicalRead;
  readonly principal: Principal;
  /** The bearer token, to forward on a miss; never keyed, never stored, never logged. */
  readonly token: string;
  readonly requestId: string;
  /** The request's trace, while tracing is on: its fill's spans are children of it. */
  readonly trace?: RequestTrace | undefined;
  /** While tracing is off: the client's W3C trace fields, passed on upstream unchanged. */
  readonly clientTrace?: TraceFields | undefined;
  /**
   * Set for a prefetch, a request no client made: fetched only with upstream capacity
   * to spare now, never queued, and never while the upstream is failing or has asked the company
   * to wait — until a client's request joins it (prefetch-standing.ts).
   */
  readonly prefetch?: PrefetchStanding | undefined;
}

/**
 * The validators of a stored response, for a conditional refresh of it (RFC 9111 §4.3.1): the
 * origin's `ETag` goes as `If-None-Match`, its `Last-Modified` as `If-Modified-Since`.
 */
export interface Validators {
  readonly etag?: string | undefined;
  readonly lastModified?: string | undefined;
}

/** An answer of the origin, as it sent it. */
export interface OriginAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  /** The origin's `Retry-After`, verbatim (429 and 503). */
  readonly retryAfter: string | undefined;
  /** The origin's `ETag` and `Last-Modified`, when it sent well-formed ones. */
  readonly etag?: string | undefined;
  readonly lastModified?: string | undefined;
  readonly body: Buffer;
  /** A list page's `data` and `meta` as the origin's check of the body parsed them; absent: not parsed. */
  readonly page?: PageParts | undefined;
  readonly elapsedMs: number;
}

/**
 * A 304 to a conditional refresh (RFC 9110 §15.4.5): the stored response is still the origin's,
 * with the validators the 304 carried (RFC 9111 §4.3.4). Never passed to a client, never stored as
 * a page: the cache freshens the entry it holds.
 */
export interface NotModified {
  readonly etag: string | undefined;
  readonly lastModified: string | undefined;
  readonly elapsedMs: number;
}

/**
 * An answer to pass on (a well-formed 200, or a 4xx as the origin sent it), or a failure the proxy
 * turns into 502/503/504 unless a stale copy may be served instead.
 */
export type OriginOutcome =
  | { readonly kind: 'answer'; readonly answer: OriginAnswer }
  /** Only ever to a request sent with validators: a 304 to any other is a bad answer (a failure). */
  | { readonly kind: 'not-modified'; readonly notModified: NotModified }
  | {
      readonly kind: 'failure';
      readonly error: ProxyError;
      /** For `Cache-Status: fwd-status`: the origin's 5xx, else the status the proxy answers. */
      readonly fwdStatus: number;
      /** The status the origin answered with, when it answered at all. */
      readonly upstreamStatus?: number;
      readonly upstreamMs: number;
      /** A prefetch the upstream had no room for now (no slot to spare, a pause, a breaker not closed). */
      readonly spareRefused?: true;
    };

export type OriginFailure = Extract<OriginOutcome, { kind: 'failure' }>;

/**
 * How the cache reaches the origin: one read, unconditional, or conditional on the stored
 * response's validators (a refresh of an entry that has them).
 */
export type Origin = (request: ReadRequest, validators?: Validators) => Promise<OriginOutcome>;
