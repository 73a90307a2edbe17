/**
 * The judge of an upstream answer (src/upstream/answer.ts): a 200 must be a JSON object, a list
 * page one with a `data` array and a `meta` object, else a bad gateway; a well-formed list page
 * comes with its parts as parsed, which the fill reads its keyset window from (no second parse); a
 * 4xx passes through; anything else is a bad gateway.
 */
import { describe, expect, it } from 'vitest';
import { judgeAnswer } from '../../src/upstream/answer.js';
import type { UpstreamAnswer } from '../../src/upstream/client.js';

function answer(status: number, body: string): UpstreamAnswer {
  return {
    status,
    body: Buffer.from(body),
    contentType: 'application/json',
    retryAfter: undefined,
    etag: undefined,
    lastModified: undefined,
    elapsedMs: 1,
  };
}

describe('the judge of an upstream answer', () => {
  it('gives a well-formed list page with its parts as parsed, and a record without', () => {
    const list = judgeAnswer('list', answer(200, '{"data":[{"id":3}],"meta":{"has_more":false,"next_after_id":null}}'));
    expect(list).toEqual({
      kind: 'ok',
      page: { data: [{ id: 3 }], meta: { has_more: false, next_after_id: null } },
    });
    expect(judgeAnswer('record', answer(200, '{"data":{"id":3}}'))).toEqual({ kind: 'ok', page: undefined });
  });

  it('calls a malformed 200 a bad gateway, passes a 4xx through, and calls a 5xx a bad gateway', () => {
    for (const body of ['not json', '[]', '{"data":{}}', '{"data":[],"meta":[]}'])
      expect(judgeAnswer('list', answer(200, body))).toEqual({ kind: 'bad_gateway', reason: 'malformed body' });
    expect(judgeAnswer('record', answer(200, '"text"')).kind).toBe('bad_gateway');
    expect(judgeAnswer('list', answer(404, '{}'))).toEqual({ kind: 'passthrough' });
    expect(judgeAnswer('list', answer(503, '{}'))).toEqual({ kind: 'bad_gateway', reason: 'status 503' });
  });
});
