/**
 * Query parsing and canonicalisation (docs/clients.md#request-rules). Pure: the canonical query built here is what the
 * cache keys and what the upstream receives, so a parameter reaches the upstream only after it has
 * been validated here, and only in the single encoding produced here.
 *
 * Parsing follows the WHATWG form-urlencoded rules that servers apply to queries: pairs split on `&`
 * only (so `status=a;per_page=100` is one value, closing the `;` cloaking trick), `+` is a space,
 * percent-escapes must decode to valid UTF-8.
 */

import { GRAMMAR_CHECKS, isCursor, isPerPage, PER_PAGE_DEFAULT } from '../catalog/grammar.js';
import type { ResourceDef } from '../catalog/resources.js';
import { InvalidParameterError } from '../errors/proxy-error.js';

export interface RawParam {
  /** The decoded name; the raw text when it does not decode. */
  readonly name: string;
  /** The decoded value; `undefined` when absent (`?a`) or when name or value do not decode. */
  readonly value: string | undefined;
}

/** The longest parameter name echoed back in an error. */
const MAX_ECHOED_NAME = 64;

function decodeComponent(text: string): string | undefined {
  const spaced = text.includes('+') ? text.replaceAll('+', ' ') : text;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return undefined; // malformed escape or invalid UTF-8
  }
}

export function parseRawQuery(rawQuery: string): RawParam[] {
  const params: RawParam[] = [];
  if (rawQuery === '') return params;
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue; // `a=1&&b=2`, a trailing `&`: nothing is sent, nothing is lost
    const eq = pair.indexOf('=');
    const rawName = eq === -1 ? pair : pair.slice(0, eq);
    const name = decodeComponent(rawName);
    if (name === undefined) {
      params.push({ name: rawName.slice(0, MAX_ECHOED_NAME), value: undefined });
      continue;
    }
    params.push({ name, value: eq === -1 ? undefined : decodeComponent(pair.slice(eq + 1)) });
  }
  return params;
}

/** OAuth's query-string token (RFC 6750 §2.3) is refused: it would end up in logs and keys. */
export function hasAccessTokenParam(params: readonly RawParam[]): boolean {
  return params.some((p) => p.name === 'access_token');
}

/** RFC 3986 percent-encoding of everything outside the unreserved set. */
export function encodeStrict(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export interface CanonicalListQuery {
  readonly perPage: number;
  /** Filters and `after_id` as validated, sorted by name. */
  readonly params: ReadonlyArray<readonly [name: string, value: string]>;
  /** `name=value&…`, sorted, `per_page` explicit, strictly encoded: the key's and the upstream's. */
  readonly text: string;
}

function invalid(parameter: string, detail: string): InvalidParameterError {
  return new InvalidParameterError(parameter.slice(0, MAX_ECHOED_NAME), detail);
}

/**
 * Validates a list request's parameters against the resource's grammar and builds the canonical
 * query. Returns the first offending parameter as an error value (no throw on the hot path).
 */
export function canonicaliseListQuery(
  resource: ResourceDef,
  params: readonly RawParam[],
): CanonicalListQuery | InvalidParameterError {
  const seen = new Map<string, string>();
  for (const { name, value } of params) {
    const isKnown = name === 'per_page' || name === 'after_id' || resource.filterNames.has(name);
    if (!isKnown) return invalid(name, `Unknown query parameter for ${resource.name}.`);
    if (seen.has(name)) return invalid(name, 'The parameter is repeated.');
    if (value === undefined || value === '') return invalid(name, 'The parameter has no value or does not decode.');
    seen.set(name, value);
  }
  let perPage = PER_PAGE_DEFAULT;
  const validated: Array<readonly [string, string]> = [];
  for (const [name, value] of seen) {
    if (name === 'per_page') {
      if (!isPerPage(value)) return invalid(name, 'per_page must be an integer from 1 to 100.');
      perPage = Number(value);
      continue;
    }
    if (name === 'after_id') {
      if (!isCursor(value)) return invalid(name, 'after_id must be 0 or a positive integer.');
    } else {
      const grammar = resource.filters.find((f) => f.name === name)?.grammar ?? 'text';
      if (!GRAMMAR_CHECKS[grammar](value)) return invalid(name, `The value of ${name} is not valid.`);
    }
    validated.push([name, value]);
  }
  validated.push(['per_page', String(perPage)]);
  validated.sort((a, b) => (a[0] < b[0] ? -1 : 1)); // names are unique: no tie
  const text = validated.map(([n, v]) => `${n}=${encodeStrict(v)}`).join('&');
  return { perPage, params: validated, text };
}

/** A single-record read takes no query parameters: the first one is refused. */
export function checkRecordQuery(params: readonly RawParam[]): InvalidParameterError | undefined {
  const first = params[0];
  return first === undefined ? undefined : invalid(first.name, 'A single-record read takes no query parameters.');
}
