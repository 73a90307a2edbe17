/**
 * The upstream's validators (RFC 9110 §8.8): an `ETag` and a `Last-Modified` are kept with a stored
 * page only when well formed, since they go back upstream as `If-None-Match` and
 * `If-Modified-Since` on its next refresh (RFC 9111 §4.3.1, docs/cache.md#revalidation). A value
 * that is not (or a header sent twice) is as if none were sent: that page is refreshed in full.
 */

/** RFC 9110 §8.8.3: `[W/]"<etagc>*"`, etagc the visible characters but DQUOTE (obs-text left out). */
const ENTITY_TAG = /^(?:W\/)?"[\x21\x23-\x7e]*"$/;
/** Longer validators than this are not kept (a stored page's header stays small). */
const MAX_LENGTH = 256;

function single(value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

/** The entity tag, when the field holds exactly one well-formed one. */
export function entityTag(value: string | string[] | undefined): string | undefined {
  const tag = single(value)?.trim();
  return tag !== undefined && tag.length <= MAX_LENGTH && ENTITY_TAG.test(tag) ? tag : undefined;
}

/**
 * The date, verbatim, when the field holds one HTTP-date (RFC 9110 §5.6.7; the obsolete forms are
 * accepted, as a recipient must): a cache sends the stored value itself back as If-Modified-Since,
 * the most interoperable choice when clocks differ (RFC 9110 §13.1.3).
 */
export function httpDate(value: string | string[] | undefined): string | undefined {
  const date = single(value)?.trim();
  if (date === undefined || date.length > 64 || !/^[\x20-\x7e]+$/.test(date)) return undefined;
  return Number.isNaN(Date.parse(date)) ? undefined : date;
}
