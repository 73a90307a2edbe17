/**
 * The whole canonicalisation of a GET target in one call, for the tests: the pure stages of
 * src/request/ in the order the data plane runs them (target, query, resource, then the canonical
 * read), without the authentication and authorisation that sit between them there
 * (docs/architecture.md#the-request-flow).
 */

import type { ProxyError } from '../../src/errors/proxy-error.js';
import { InvalidBearerRequestError, InvalidRequestError, NotFoundError } from '../../src/errors/proxy-error.js';
import { buildCanonicalRead, type CanonicalRead } from '../../src/request/canonical-read.js';
import { hasAccessTokenParam, parseRawQuery } from '../../src/request/query.js';
import { resolveRoute } from '../../src/request/route.js';
import { classifyTarget } from '../../src/request/target.js';

export function canonicaliseTarget(url: string): CanonicalRead | ProxyError {
  const target = classifyTarget(url);
  if (target.kind === 'invalid') return new InvalidRequestError('The request target must be a path.');
  if (target.kind === 'other') return new NotFoundError();
  const params = parseRawQuery(target.rawQuery);
  if (hasAccessTokenParam(params))
    return new InvalidBearerRequestError('Tokens are accepted only in the Authorization header.');
  const route = resolveRoute(target.path);
  if (route.kind === 'unknown' || route.kind === 'malformed') return new NotFoundError();
  return buildCanonicalRead(route, params);
}
