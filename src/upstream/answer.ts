/**
 * What an upstream answer means for the client (docs/clients.md#errors): a usable 200, a 4xx to pass through
 * as the upstream sent it, or a bad gateway. A 200 must be a JSON object, and a list page must have
 * a `data` array and a `meta` object: anything else would be stored and served as if it were data.
 */
import type { CanonicalRead } from '../request/canonical-read.js';
import { type PageParts, partsOf } from '../request/next-page.js';
import type { UpstreamAnswer } from './client.js';

/**
 * `ok` carries a list page's parts as the check parsed them, so that what is read of the page
 * afterwards (its keyset window) needs no second parse of its body.
 */
export type AnswerVerdict =
  | { readonly kind: 'ok'; readonly page: PageParts | undefined }
  | { readonly kind: 'passthrough' }
  | { readonly kind: 'bad_gateway'; readonly reason: string };

const PASSTHROUGH: AnswerVerdict = { kind: 'passthrough' };
const MALFORMED: AnswerVerdict = { kind: 'bad_gateway', reason: 'malformed body' };

function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The verdict on a 200's body: what the seed promises for this kind of read, or malformed. */
function judgeBody(kind: CanonicalRead['kind'], body: Buffer): AnswerVerdict {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return MALFORMED;
  }
  if (!isJsonObject(parsed)) return MALFORMED;
  if (kind === 'record') return { kind: 'ok', page: undefined };
  if (!Array.isArray(parsed.data) || !isJsonObject(parsed.meta)) return MALFORMED;
  return { kind: 'ok', page: partsOf(parsed) };
}

export function judgeAnswer(kind: CanonicalRead['kind'], answer: UpstreamAnswer): AnswerVerdict {
  if (answer.status === 200) return judgeBody(kind, answer.body);
  // 401/403/404/429 (and any other client error, such as a 400 for a value the upstream refuses)
  // are the upstream's word on this client's request: passed through unchanged.
  if (answer.status >= 400 && answer.status < 500) return PASSTHROUGH;
  return { kind: 'bad_gateway', reason: `status ${answer.status}` };
}
