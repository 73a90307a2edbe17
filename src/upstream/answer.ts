/**
 * What an upstream answer means for the client (docs/clients.md#errors): a usable 200, a 4xx to pass through
 * as the upstream sent it, or a bad gateway. A 200 must be a JSON object, and a list page must have
 * a `data` array and a `meta` object: anything else would be stored and served as if it were data.
 */
import type { CanonicalRead } from '../request/canonical-read.js';
import type { UpstreamAnswer } from './client.js';

export type AnswerVerdict =
  | { readonly kind: 'ok' }
  | { readonly kind: 'passthrough' }
  | { readonly kind: 'bad_gateway'; readonly reason: string };

const OK: AnswerVerdict = { kind: 'ok' };
const PASSTHROUGH: AnswerVerdict = { kind: 'passthrough' };

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** True when the body is what the seed promises for this kind of read. */
export function isWellFormedBody(kind: CanonicalRead['kind'], body: Buffer): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return false;
  }
  if (!isJsonObject(parsed)) return false;
  return kind === 'record' || (Array.isArray(parsed.data) && isJsonObject(parsed.meta));
}

export function judgeAnswer(kind: CanonicalRead['kind'], answer: UpstreamAnswer): AnswerVerdict {
  if (answer.status === 200) {
    return isWellFormedBody(kind, answer.body) ? OK : { kind: 'bad_gateway', reason: 'malformed body' };
  }
  // 401/403/404/429 (and any other client error, such as a 400 for a value the upstream refuses)
  // are the upstream's word on this client's request: passed through unchanged.
  if (answer.status >= 400 && answer.status < 500) return PASSTHROUGH;
  return { kind: 'bad_gateway', reason: `status ${answer.status}` };
}
