/**
 * The one registry of the errors the proxy itself produces (docs/clients.md#errors), with their HTTP status.
 * A code is part of the client contract: never rename one.
 */
export const ERROR_REGISTRY = {
  invalid_parameter: { status: 400, title: 'Invalid query parameter' },
  invalid_request: { status: 400, title: 'Invalid request' },
  unauthenticated: { status: 401, title: 'Unauthenticated' },
  forbidden: { status: 403, title: 'Forbidden' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  /** A cached page in none of the content codings the client's Accept-Encoding allows. */
  not_acceptable: { status: 406, title: 'Not acceptable' },
  rate_limited: { status: 429, title: 'Too many requests' },
  request_headers_too_large: { status: 431, title: 'Request header fields too large' },
  /** Only for a defect in the proxy itself; every input has a defined answer below 500. */
  internal_error: { status: 500, title: 'Internal error' },
  bad_gateway: { status: 502, title: 'Bad gateway' },
  upstream_unavailable: { status: 503, title: 'Upstream unavailable' },
  upstream_timeout: { status: 504, title: 'Upstream timeout' },
  /** Admin API: a change applied on this replica that Redis could not take to the others. */
  shared_state_unavailable: { status: 503, title: 'Shared state unavailable' },
  /**
   * A replica that has not read the operator state since it started cannot tell a revoked token or
   * a blocked company: it refuses rather than serve as though nothing were (`control.unconfirmed`).
   */
  operator_state_unavailable: { status: 503, title: 'Operator state unavailable' },
  /** A request that reached a replica draining for shutdown (on a kept-alive connection). */
  shutting_down: { status: 503, title: 'Shutting down' },
  /** Admin API: a body that is JSON but not what the endpoint takes (`pointer` names the member). */
  invalid_body: { status: 400, title: 'Invalid request body' },
  /** Admin API: a body that is not `application/json`. */
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ErrorCode = keyof typeof ERROR_REGISTRY;

export const ERROR_CODES = Object.keys(ERROR_REGISTRY) as ErrorCode[];

/** RFC 9457 `type`: a URN, so that no host name is implied. */
export function problemType(code: ErrorCode): string {
  return `urn:slab-ops-proxy:problem:${code}`;
}
