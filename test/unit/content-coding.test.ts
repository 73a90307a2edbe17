/**
 * Accept-Encoding as RFC 9110 §12.5.3 reads it, and the coding each header gets
 * (docs/clients.md#content-coding): weights, `*`, `identity;q=0`, case, `x-gzip`, malformed members, and the
 * rule that a coding the client did not accept is never chosen.
 */
import { describe, expect, it } from 'vitest';
import { chooseCoding, parseAcceptEncoding } from '../../src/http/content-coding.js';

describe('parseAcceptEncoding', () => {
  it.each([
    ['', { br: 0, gzip: 0, identity: 1000 }],
    ['br', { br: 1000, gzip: 0, identity: 1000 }],
    ['gzip, deflate, br, zstd', { br: 1000, gzip: 1000, identity: 1000 }],
    ['BR;Q=0.5, X-Gzip;q=0.25', { br: 500, gzip: 250, identity: 1000 }],
    ['br ; q=0.125', { br: 125, gzip: 0, identity: 1000 }],
    ['*', { br: 1000, gzip: 1000, identity: 1000 }],
    ['*;q=0', { br: 0, gzip: 0, identity: 0 }],
    ['*;q=0, identity', { br: 0, gzip: 0, identity: 1000 }],
    ['gzip;q=0.5, *;q=0.1', { br: 100, gzip: 500, identity: 1000 }],
    ['identity;q=0, br', { br: 1000, gzip: 0, identity: 0 }],
    ['br;q=1.000, gzip;q=0.', { br: 1000, gzip: 0, identity: 1000 }],
  ])('%j', (header, weights) => {
    expect(parseAcceptEncoding(header)).toEqual(weights);
  });

  it.each(['br;q=2', 'br;q=0.1234', 'br;q=', 'br;level=1', 'b r', 'br;q=1.5'])(
    'ignores the malformed member %j',
    (header) => {
      expect(parseAcceptEncoding(`${header}, gzip;q=0.5`)).toEqual({ br: 0, gzip: 500, identity: 1000 });
    },
  );
});

describe('chooseCoding', () => {
  it.each([
    [undefined, true, 'identity'],
    ['', true, 'identity'],
    ['br', true, 'br'],
    ['gzip', true, 'gzip'],
    ['gzip, deflate, br', true, 'br'],
    ['br;q=0.5, gzip', true, 'gzip'],
    ['identity, br;q=0.9', true, 'identity'],
    ['deflate', true, 'identity'],
    ['br;q=0', true, 'identity'],
    ['identity;q=0, br', true, 'br'],
    ['*', true, 'br'],
    // A body that does not compress has no brotli form: identity first, gzip only when asked for.
    ['br', false, 'identity'],
    ['gzip, deflate, br', false, 'identity'],
    ['identity;q=0, gzip', false, 'gzip'],
  ] as const)('%j (compresses: %s) → %s', (header, compresses, coding) => {
    expect(chooseCoding(header, compresses)).toBe(coding);
  });

  it.each([
    ['*;q=0', true],
    ['identity;q=0', true],
    ['identity;q=0, deflate', true],
    ['br, identity;q=0', false],
  ] as const)('nothing acceptable: %j (compresses: %s)', (header, compresses) => {
    expect(chooseCoding(header, compresses)).toBeUndefined();
  });
});
