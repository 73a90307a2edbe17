/**
 * The `path` of a request log line, in a form that cannot carry a token wherever a client puts
 * one (docs/operations.md#logs): never the query, and of the path only the segments that are short
 * lowercase words (`[a-z][a-z0-9._-]`, at most 24 characters). No JWT fits that grammar (each of
 * its segments is base64url of JSON, `eyJ…`, or a signature longer than 24 characters), nor does
 * a percent-escape; a word holding a configured secret (`holdsSecret`) is replaced too. Every other
 * segment is logged as `{redacted}`, and a record read's id as `{id}` (the data plane builds those
 * templates once per resource).
 */
import { holdsSecret } from './secrets.js';

export const REDACTED_SEGMENT = '{redacted}';
export const ID_SEGMENT = '{id}';

const WORD = /^[a-z][a-z0-9._-]{0,23}$/;
/** Paths deeper than this are cut, with one last `{redacted}` for the rest. */
const MAX_SEGMENTS = 12;

/** The loggable form of a path (the part of the target before `?`). */
export function loggedPath(path: string): string {
  const segments = path.split('/');
  const shown: string[] = [];
  for (const [index, segment] of segments.entries()) {
    if (index > MAX_SEGMENTS) {
      shown.push(REDACTED_SEGMENT);
      break;
    }
    shown.push(segment === '' || (WORD.test(segment) && !holdsSecret(segment)) ? segment : REDACTED_SEGMENT);
  }
  return shown.join('/');
}
