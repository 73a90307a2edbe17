/**
 * Errors as classes with a stable `code` (the jose pattern). `detail` is written for clients and
 * must never carry a library message, a key or a token; `cause` is for logs only.
 */
import { ERROR_REGISTRY, type ErrorCode } from './registry.js';

export type ProblemExtras = Readonly<Record<string, string | number | readonly string[]>>;

export abstract class ProxyError extends Error {
  abstract readonly code: ErrorCode;
  /** Response headers this error needs (`Allow`, `Retry-After`, `WWW-Authenticate`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly detail: string,
    headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.headers = headers;
  }

  get status(): number {
    return ERROR_REGISTRY[this.code].status;
  }

  /** Members added to the problem body beyond the standard ones. */
  extras(): ProblemExtras {
    return {};
  }
}

export class InvalidParameterError extends ProxyError {
  readonly code = 'invalid_parameter';
  constructor(
    readonly parameter: string,
    detail: string,
  ) {
    super(detail);
  }
  override extras(): ProblemExtras {
    return { parameter: this.parameter };
  }
}

export class InvalidRequestError extends ProxyError {
  readonly code = 'invalid_request';
}

/**
 * The `WWW-Authenticate` challenge of RFC 6750 §3, realm `slab-ops`. A request without
 * credentials gets it bare; one whose credentials were refused names the reason (§3.1):
 * `invalid_request` (400: sent in a way the proxy refuses), `invalid_token` (401),
 * `insufficient_scope` (403, with the `scope` it needs when that is an OAuth scope).
 */
function bearerChallenge(
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope',
  scope?: string,
): Readonly<Record<string, string>> {
  const attributes = ['realm="slab-ops"'];
  if (error !== undefined) attributes.push(`error="${error}"`);
  if (scope !== undefined) attributes.push(`scope="${scope}"`);
  return { 'www-authenticate': `Bearer ${attributes.join(', ')}` };
}

/** RFC 6750 §3.1: a scope value is scope-tokens (printable ASCII but `"` and `\`) separated by spaces. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+(?: [\x21\x23-\x5b\x5d-\x7e]+)*$/;

/**
 * A 400 about how the bearer token was sent (two `Authorization` headers, a token in the query):
 * `invalid_request` in the body and in the challenge (RFC 6750 §3.1).
 */
export class InvalidBearerRequestError extends InvalidRequestError {
  constructor(detail: string) {
    super(detail, bearerChallenge('invalid_request'));
  }
}

/**
 * `reason` is internal (for logs and metrics); the client sees one generic detail, as RFC 6750
 * suggests, so that a prober learns nothing about which check failed.
 */
export type UnauthenticatedReason =
  | 'missing'
  | 'malformed'
  | 'oversized'
  | 'signature'
  | 'algorithm'
  | 'expired'
  | 'not_yet_valid'
  | 'claims'
  | 'issuer'
  | 'audience'
  | 'key_unavailable'
  | 'revoked';

export class UnauthenticatedError extends ProxyError {
  readonly code = 'unauthenticated';
  constructor(readonly reason: UnauthenticatedReason) {
    super(
      reason === 'missing' ? 'A bearer token is required.' : 'The bearer token is invalid, expired or revoked.',
      // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
      bearerChallenge(reason === 'missing' ? undefined : 'invalid_token'),
    );
  }
}

export type ForbiddenReason = 'permission' | 'employee' | 'scope' | 'module' | 'company';

export class ForbiddenError extends ProxyError {
  readonly code = 'forbidden';
  constructor(
    readonly reason: ForbiddenReason,
    readonly missing: readonly string[] = [],
  ) {
    const scope = reason === 'scope' ? missing.join(' ') : undefined;
    super(
      FORBIDDEN_DETAILS[reason],
      bearerChallenge('insufficient_scope', scope !== undefined && SCOPE.test(scope) ? scope : undefined),
    );
  }
  override extras(): ProblemExtras {
    return { reason: this.reason, missing: this.missing };
  }
}

const FORBIDDEN_DETAILS: Readonly<Record<ForbiddenReason, string>> = {
  permission: 'The credential lacks a permission this resource requires.',
  employee: 'The employee lacks a permission this resource requires, or is blocked.',
  scope: 'The token scope does not allow this operation.',
  module: 'The plan does not include this module.',
  company: 'The company is blocked.',
};

/** Every `reason` a 403 can carry, for the OpenAPI description. */
export const FORBIDDEN_REASONS = Object.keys(FORBIDDEN_DETAILS) as ForbiddenReason[];

export class NotFoundError extends ProxyError {
  readonly code = 'not_found';
  constructor(detail = 'No such resource.') {
    super(detail);
  }
}

export const ALLOWED_METHODS = 'GET, HEAD, OPTIONS';

export class MethodNotAllowedError extends ProxyError {
  readonly code = 'method_not_allowed';
  constructor() {
    super('Only GET, HEAD and OPTIONS are allowed.', { allow: ALLOWED_METHODS });
  }
}

export class NotAcceptableError extends ProxyError {
  readonly code = 'not_acceptable';
  constructor() {
    super(
      'None of the content codings the Accept-Encoding header allows can be sent (identity, gzip and br are offered).',
    );
  }
}

/**
 * Which limit refused: a credential's, a company's (the inbound limits), or the upstream's own 429;
 * on the admin port, the change feed's bucket (docs/operations.md#the-change-feed).
 */
export type RateLimitPolicy = 'credential' | 'company' | 'upstream' | 'invalidation';

export class RateLimitedError extends ProxyError {
  readonly code = 'rate_limited';
  constructor(
    readonly retryAfterSeconds: number,
    readonly policy: RateLimitPolicy,
  ) {
    super('Too many requests; retry after the time given.', { 'retry-after': String(retryAfterSeconds) });
  }
  override extras(): ProblemExtras {
    return { retry_after: this.retryAfterSeconds, policy: this.policy };
  }
}

export class RequestHeadersTooLargeError extends ProxyError {
  readonly code = 'request_headers_too_large';
  constructor() {
    super('The request headers are too large.');
  }
}

export class InternalError extends ProxyError {
  readonly code = 'internal_error';
  constructor() {
    super('The proxy failed to answer this request.');
  }
}

export class BadGatewayError extends ProxyError {
  readonly code = 'bad_gateway';
  constructor(detail = 'The upstream answered with an error or an invalid response.') {
    super(detail);
  }
}

export class UpstreamUnavailableError extends ProxyError {
  readonly code = 'upstream_unavailable';
  constructor(retryAfterSeconds?: number) {
    super(
      'The upstream cannot be reached.',
      retryAfterSeconds === undefined ? {} : { 'retry-after': String(retryAfterSeconds) },
    );
  }
}

export class UpstreamTimeoutError extends ProxyError {
  readonly code = 'upstream_timeout';
  constructor() {
    super('The upstream did not answer in time.');
  }
}

export class ShuttingDownError extends ProxyError {
  readonly code = 'shutting_down';
  constructor() {
    super('This replica is shutting down; retry, another one will answer.', {
      'retry-after': '1',
      connection: 'close',
    });
  }
}

export class OperatorStateUnavailableError extends ProxyError {
  readonly code = 'operator_state_unavailable';
  constructor() {
    super(
      'This replica has not yet read which credentials are revoked and which companies are blocked; retry shortly.',
      { 'retry-after': '1' },
    );
  }
}

export class SharedStateUnavailableError extends ProxyError {
  readonly code = 'shared_state_unavailable';
  constructor() {
    super('The change applies on this replica, but Redis could not take it to the others: retry once Redis is back.', {
      'retry-after': '1',
    });
  }
}

/** RFC 9457 §3: `pointer` is a JSON Pointer (RFC 6901) to the member at fault, as a URI fragment. */
export class InvalidBodyError extends ProxyError {
  readonly code = 'invalid_body';
  constructor(
    readonly pointer: string,
    detail: string,
  ) {
    super(detail);
  }
  override extras(): ProblemExtras {
    return { pointer: this.pointer };
  }
}

export class UnsupportedMediaTypeError extends ProxyError {
  readonly code = 'unsupported_media_type';
  constructor() {
    super('Send the body as application/json.');
  }
}

/** An error's message for a log line or a terminal: never its payload, its stack or its cause. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
