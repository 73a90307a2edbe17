/**
 * `If-None-Match` evaluation (RFC 9110 §13.1.2): `*`, or a list of entity tags compared with the
 * weak comparison function (a `W/` prefix is ignored on either side).
 */
function opaque(tag: string): string {
  const trimmed = tag.trim();
  return trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed;
}

export function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined || header === '') return false;
  if (header.trim() === '*') return true;
  const current = opaque(etag);
  // Entity tags cannot contain commas (RFC 9110 §8.8.3), so the list splits on them.
  return header.split(',').some((candidate) => opaque(candidate) === current);
}
