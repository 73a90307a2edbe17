/**
 * Resolves the path under the API prefix to one of the 26 reads: `<resource>` (list) or
 * `<resource>/<id>` (one record). Names are exact and case-sensitive; the path is not
 * percent-decoded, so `receipt%73` is not `receipts` (docs/clients.md#request-rules).
 */

import { isPositiveId } from '../catalog/grammar.js';
import { findResource, type ResourceDef } from '../catalog/resources.js';

export type Route =
  | { readonly kind: 'list'; readonly resource: ResourceDef }
  | { readonly kind: 'record'; readonly resource: ResourceDef; readonly id: string }
  /** A known resource with a malformed id or extra segments: 404 without asking the upstream. */
  | { readonly kind: 'malformed'; readonly resource: ResourceDef }
  /** Not one of the thirteen resources. */
  | { readonly kind: 'unknown' };

const UNKNOWN: Route = { kind: 'unknown' };

export function resolveRoute(path: string): Route {
  const slash = path.indexOf('/');
  const resource = findResource(slash === -1 ? path : path.slice(0, slash));
  if (resource === undefined) return UNKNOWN;
  if (slash === -1) return { kind: 'list', resource };
  const id = path.slice(slash + 1);
  return isPositiveId(id) ? { kind: 'record', resource, id } : { kind: 'malformed', resource };
}
