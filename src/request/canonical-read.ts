/**
 * The canonical read: one of the 26 cacheable reads, validated, in the single form that is keyed
 * and forwarded. Built by the pure stages of `target`, `route` and `query`.
 */
import { API_PREFIX, type ResourceDef } from '../catalog/resources.js';
import type { ProxyError } from '../errors/proxy-error.js';
import { canonicaliseListQuery, checkRecordQuery, type RawParam } from './query.js';
import type { Route } from './route.js';

export interface CanonicalRead {
  readonly resource: ResourceDef;
  readonly kind: 'list' | 'record';
  /** The record id (`record` reads only). */
  readonly id: string | undefined;
  /** The canonical query (`list` reads only; `''` for a record). */
  readonly query: string;
  /** The path and query the upstream receives, relative to its base URL. */
  readonly upstreamTarget: string;
}

/** Builds the canonical read of a resolved route, or the 400 its query deserves. */
export function buildCanonicalRead(
  route: Extract<Route, { kind: 'list' | 'record' }>,
  params: readonly RawParam[],
): CanonicalRead | ProxyError {
  if (route.kind === 'record') {
    const error = checkRecordQuery(params);
    if (error !== undefined) return error;
    return {
      resource: route.resource,
      kind: 'record',
      id: route.id,
      query: '',
      upstreamTarget: `${API_PREFIX}/${route.resource.name}/${route.id}`,
    };
  }
  const query = canonicaliseListQuery(route.resource, params);
  if (query instanceof Error) return query;
  return listRead(route.resource, query.text);
}

/** The canonical list read of `resource` with a canonical query (`canonicaliseListQuery`'s text). */
export function listRead(resource: ResourceDef, query: string): CanonicalRead {
  return { resource, kind: 'list', id: undefined, query, upstreamTarget: `${API_PREFIX}/${resource.name}?${query}` };
}
