/**
 * What must never be written to a log, as far as text can tell (docs/operations.md#logs): a compact JOSE
 * token (a JWS or JWE starts its first segment with `ey` or `ew`, base64url of a JSON object,
 * followed by a dot), and the secrets this process was configured with (the admin token),
 * registered once at start. Used where the log would otherwise echo client text that it does not
 * replace with a template: the client's `X-Request-Id`, and the words of a logged path.
 */

/** Base64url of `{` and a quote, space or line break, a dot, then more: a JWS/JWE, or its first two segments. */
const COMPACT_JOSE = /e[wy][A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]/;

const registered = new Set<string>();

/** A configured secret (the admin token): no text holding it is logged from now on. */
export function registerSecret(secret: string): void {
  if (secret !== '') registered.add(secret);
}

/** True when the text holds a token or a registered secret. */
export function holdsSecret(text: string): boolean {
  if (COMPACT_JOSE.test(text)) return true;
  for (const secret of registered) if (text.includes(secret)) return true;
  return false;
}
