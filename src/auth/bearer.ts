/**
 * Reads the bearer token from the request headers. Node keeps only the first of two
 * `Authorization` headers in `req.headers` (docs/architecture.md#nodes-http-parser), so the distinct list is read instead: two
 * headers are a 400, since the proxy and the upstream could each read a different one.
 */
export type BearerResult =
  | { readonly kind: 'token'; readonly token: string }
  | { readonly kind: 'missing' }
  | { readonly kind: 'malformed' }
  | { readonly kind: 'duplicate' };

const MISSING: BearerResult = { kind: 'missing' };
const MALFORMED: BearerResult = { kind: 'malformed' };
const DUPLICATE: BearerResult = { kind: 'duplicate' };

/** RFC 6750 §2.1: `Bearer 1*SP b64token`; the scheme is case-insensitive (RFC 9110 §11.1). */
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const BEARER_SCHEME = /^bearer(?:[ \t]|$)/i;

export function readBearer(values: readonly string[] | undefined): BearerResult {
  if (values === undefined || values.length === 0) return MISSING;
  if (values.length > 1) return DUPLICATE;
  const value = values[0] ?? '';
  // Another scheme (`Basic …`) carries no bearer credentials at all: RFC 6750 §3.1 treats it as
  // missing, so its challenge has no error code.
  if (!BEARER_SCHEME.test(value)) return MISSING;
  const match = BEARER.exec(value);
  return match?.[1] === undefined ? MALFORMED : { kind: 'token', token: match[1] };
}
