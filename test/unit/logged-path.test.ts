/**
 * The loggable form of a path (docs/operations.md#logs) and the secret check behind it and behind the
 * client's `X-Request-Id`: words stay, anything that could be or hold a token becomes `{redacted}`.
 */
import { describe, expect, it } from 'vitest';
import { loggedPath } from '../../src/observability/logged-path.js';
import { holdsSecret, registerSecret } from '../../src/observability/secrets.js';
import { token } from '../helpers/tokens.js';

describe('loggedPath', () => {
  it('keeps short lowercase words, and the slashes between them', () => {
    expect(loggedPath('/api/slab/v1/operations/receipts')).toBe('/api/slab/v1/operations/receipts');
    expect(loggedPath('/admin/cache/ttl/quote-link-items')).toBe('/admin/cache/ttl/quote-link-items');
    expect(loggedPath('/favicon.ico')).toBe('/favicon.ico');
    expect(loggedPath('/')).toBe('/');
    expect(loggedPath('/a//b/')).toBe('/a//b/');
  });

  it.each([
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU'],
    ['a JWT signature alone', 'c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmUtc2ln'],
    ['digits first', '42'],
    ['upper case', 'Receipts'],
    ['a percent-escape', '%65yJhbGciOiJIUzI1NiJ9'],
    ['25 characters', 'abcdefghijklmnopqrstuvwxy'],
    ['a space', 'a b'],
  ])('replaces %s', (_kind, segment) => {
    expect(loggedPath(`/x/${segment}/y`)).toBe('/x/{redacted}/y');
  });

  it('keeps 24 characters, and cuts a path after 12 segments', () => {
    expect(loggedPath('/abcdefghijklmnopqrstuvwx')).toBe('/abcdefghijklmnopqrstuvwx');
    expect(loggedPath(`/${Array.from({ length: 20 }, () => 'a').join('/')}`)).toBe(
      `/${Array.from({ length: 12 }, () => 'a').join('/')}/{redacted}`,
    );
  });

  it('replaces a word that holds a registered secret', () => {
    expect(loggedPath('/admin/opensesame-unit')).toBe('/admin/opensesame-unit');
    registerSecret('opensesame-unit');
    expect(loggedPath('/admin/opensesame-unit')).toBe('/admin/{redacted}');
    expect(loggedPath('/admin/x-opensesame-unit')).toBe('/admin/{redacted}');
  });
});

describe('holdsSecret', () => {
  it('finds a real token, whole or its first two segments, inside other text', async () => {
    const jwt = await token();
    expect(holdsSecret(jwt)).toBe(true);
    expect(holdsSecret(`trace-${jwt.split('.').slice(0, 2).join('.')}`)).toBe(true);
  });

  it('leaves ordinary request ids alone', () => {
    for (const id of ['3f2b8c1e-9a4d-4c6e-8f0a-1b2c3d4e5f60', '01HZX3K4M5N6P7Q8R9S0T1V2W3', 'req.42:a-b_c', 'eye'])
      expect(holdsSecret(id)).toBe(false);
  });
});
