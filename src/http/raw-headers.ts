/**
 * Request header fields read straight from `rawHeaders`, the parser's own list of name/value
 * pairs. `req.headers` and `req.headersDistinct` are built on first use for every field a request
 * carries, and a cache hit reads five fields of them: building both objects costs more than the
 * whole authentication step (docs/architecture.md#why-the-hit-path-is-built-as-it-is). A scan of the few pairs a
 * request carries allocates nothing unless a field repeats.
 *
 * The answers are the ones Node gives: `fieldLines` is `headersDistinct[name]` (every line of the
 * field, in order), and `fieldValue` is `headers[name]` for a field Node joins (its lines joined
 * with ", ", RFC 9110 §5.3): use it only for such fields, not for those Node keeps the first line
 * of (`Host`, `Authorization`, `Content-Type`, …), which callers read with `fieldLines`.
 */
import type { IncomingMessage } from 'node:http';

/** Whether a raw field name is `name`, which is lowercase (field names are case-insensitive). */
function isField(raw: string, name: string): boolean {
  return raw.length === name.length && (raw === name || raw.toLowerCase() === name);
}

/** Every line of the field `name` (lowercase), in order; `undefined` when the request has none. */
export function fieldLines(req: IncomingMessage, name: string): string[] | undefined {
  const raw = req.rawHeaders;
  let lines: string[] | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const field = raw[i];
    const value = raw[i + 1];
    if (field === undefined || value === undefined || !isField(field, name)) continue;
    if (lines === undefined) lines = [value];
    else lines.push(value);
  }
  return lines;
}

/** The field `name` (lowercase) as one value: its lines joined with ", "; `undefined` when absent. */
export function fieldValue(req: IncomingMessage, name: string): string | undefined {
  const raw = req.rawHeaders;
  let value: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const field = raw[i];
    const line = raw[i + 1];
    if (field === undefined || line === undefined || !isField(field, name)) continue;
    value = value === undefined ? line : `${value}, ${line}`;
  }
  return value;
}
