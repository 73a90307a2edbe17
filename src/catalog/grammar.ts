/**
 * Value grammars of docs/clients.md#resources. Every value from a client is matched against one of these before it
 * is converted or used; Number()/parseInt() would accept "1e2", " 5", "0x10" and "5abc" (docs/architecture.md#nodes-http-parser).
 */

/** A positive record identifier: `^[1-9][0-9]{0,15}$` and at most 2^53−1. */
const POSITIVE_ID = /^[1-9][0-9]{0,15}$/;
/** A keyset cursor: 0 or a positive identifier, at most 2^53−1. */
const CURSOR = /^(?:0|[1-9][0-9]{0,15})$/;
const PER_PAGE = /^[1-9][0-9]{0,2}$/;
/**
 * Free-text filter values: 1–128 characters (code points), no control characters (C0, DEL, C1).
 * The `u` flag makes `{1,128}` count code points, not UTF-16 units.
 */
const TEXT = /^[^\p{Cc}]{1,128}$/u;
/** The text grammar's pattern source, for the OpenAPI description (ECMA-262 with the `u` flag, as JSON Schema 2020-12 reads it). */
export const FILTER_TEXT_PATTERN = TEXT.source;

export const PER_PAGE_MAX = 100;
export const PER_PAGE_DEFAULT = 30;

function withinSafeInteger(digits: string): boolean {
  // 16 digits can exceed 2^53−1; fewer cannot.
  return digits.length < 16 || Number(digits) <= Number.MAX_SAFE_INTEGER;
}

export function isPositiveId(value: string): boolean {
  return POSITIVE_ID.test(value) && withinSafeInteger(value);
}

export function isCursor(value: string): boolean {
  return CURSOR.test(value) && withinSafeInteger(value);
}

export function isPerPage(value: string): boolean {
  return PER_PAGE.test(value) && Number(value) <= PER_PAGE_MAX;
}

export function isBooleanText(value: string): boolean {
  return value === 'true' || value === 'false';
}

export function isFilterText(value: string): boolean {
  return TEXT.test(value);
}

/** The grammar a filter's values follow, named so the catalog and the docs can say it. */
export type FilterGrammar = 'id' | 'boolean' | 'text';

export const GRAMMAR_CHECKS: Readonly<Record<FilterGrammar, (value: string) => boolean>> = {
  id: isPositiveId,
  boolean: isBooleanText,
  text: isFilterText,
};

export const GRAMMAR_DESCRIPTIONS: Readonly<Record<FilterGrammar, string>> = {
  id: 'a positive integer (1 to 2^53-1, no leading zeros)',
  boolean: '`true` or `false`',
  text: '1-128 characters, no control characters',
};

/**
 * docs/clients.md#resources assigns a grammar by the filter's name: `*_id` filters are identifiers, `active` is a
 * boolean, everything else is text. Deriving it keeps the catalog from stating it twice.
 */
export function grammarForFilter(name: string): FilterGrammar {
  if (name.endsWith('_id')) return 'id';
  if (name === 'active') return 'boolean';
  return 'text';
}
