/**
 * The sandbox's own reading of a request's query and record id, written from the specification
 * (seed §2, §4 and §8), not from the proxy's canonicaliser or value grammars. The query is decoded
 * the way an ordinary server decodes it (WHATWG `URLSearchParams`), so that a test that sends one
 * request to both compares two independent readings of it.
 *
 * - seed §2: "the filter names are the only parameters besides after_id and per_page"; every other
 *   name is refused (400 `invalid_parameter`, naming it). A name given twice is refused too: the
 *   seed gives one value to each parameter, and which one would count is anybody's guess.
 * - seed §4, §8: `per_page` is an integer from 1 to 100, 30 when absent; `after_id` is a cursor, the
 *   `meta.next_after_id` of a previous page (an integer id; 0 starts before every record). Both are
 *   written as JSON writes integers (decimal digits, no sign, no leading zero); anything else is
 *   refused.
 * - seed §2: the filters' value types are not shown, so a value is matched as text against the
 *   record's field, "combined as given" (every filter must match). A parameter without a value says
 *   nothing the seed gives a meaning to, and is refused.
 * - seed §4: the single-record operation takes no query parameter; any is refused. A record is
 *   addressed by its id as the API writes it; any other `{id}` addresses no record (404).
 * The seed leaves the answer to invalid values open (§7 "Gap"); the sandbox answers 400.
 */
import type { SeedResource } from './resources.js';

/** Seed §4 and §8. */
export const PER_PAGE_DEFAULT = 30;
const PER_PAGE_LARGEST = 100;

export interface ListQuery {
  readonly perPage: number;
  /** Records with a larger id come next; 0: from the first. */
  readonly afterId: number;
  /** Every filter given, `[name, value]`. */
  readonly filters: ReadonlyArray<readonly [string, string]>;
}

/** A refused query: the parameter at fault. */
export interface InvalidParameter {
  readonly invalid: string;
}

/** An integer as JSON writes it: decimal digits, no sign, no leading zero; within 2^53 − 1. */
function integerText(text: string): number | undefined {
  if (!/^(?:0|[1-9][0-9]*)$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** A list operation's query (the part after `?`, as sent). */
export function readListQuery(search: string, resource: SeedResource): ListQuery | InvalidParameter {
  const seen = new Set<string>();
  let perPage = PER_PAGE_DEFAULT;
  let afterId = 0;
  const filters: Array<readonly [string, string]> = [];
  for (const [name, value] of new URLSearchParams(search)) {
    if (seen.has(name) || value === '') return { invalid: name };
    seen.add(name);
    if (name === 'per_page') {
      const size = integerText(value);
      if (size === undefined || size < 1 || size > PER_PAGE_LARGEST) return { invalid: name };
      perPage = size;
    } else if (name === 'after_id') {
      const cursor = integerText(value);
      if (cursor === undefined) return { invalid: name };
      afterId = cursor;
    } else if (resource.filters.includes(name)) {
      filters.push([name, value]);
    } else {
      return { invalid: name };
    }
  }
  return { perPage, afterId, filters };
}

/** A single-record operation's query: no parameter at all. */
export function readRecordQuery(search: string): InvalidParameter | undefined {
  for (const [name] of new URLSearchParams(search)) return { invalid: name };
  return undefined;
}

/** The record id of a `{id}` path value, or `undefined` when it cannot be one. */
export function recordId(text: string): number | undefined {
  const id = integerText(text);
  return id === undefined || id === 0 ? undefined : id;
}
