/**
 * What a fake origin answers in the cache's tests: a JSON answer with `body`, a 200 unless said
 * otherwise, without validators or Retry-After unless given.
 */
import type { OriginAnswer, OriginOutcome } from '../../src/cache/read/origin.js';

export function answered(
  body: Buffer,
  fields: Partial<Pick<OriginAnswer, 'status' | 'etag' | 'lastModified' | 'elapsedMs'>> = {},
): OriginOutcome {
  return {
    kind: 'answer',
    answer: {
      status: 200,
      contentType: 'application/json',
      retryAfter: undefined,
      etag: undefined,
      lastModified: undefined,
      elapsedMs: 1,
      ...fields,
      body,
    },
  };
}
