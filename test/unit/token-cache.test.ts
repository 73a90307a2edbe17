/**
 * The verified-token cache: bounded, never past `exp` nor its own age limit, and never a cache of
 * failures (a token refused once for a time reason is accepted once the time has come).
 */

import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { VerifiedTokenCache } from '../../src/auth/token-cache.js';
import { createTokenVerifier } from '../../src/auth/verify-token.js';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import { UnauthenticatedError } from '../../src/errors/proxy-error.js';
import { testPrincipal } from '../helpers/principals.js';
import { DEV_KEYS } from '../helpers/sandbox.js';
import { token } from '../helpers/tokens.js';

function principal(expiresAt: number, company = '1'): Principal {
  return testPrincipal({ company, subject: company, permissions: new Set(['view_slab']), expiresAt });
}

describe('VerifiedTokenCache', () => {
  it('forgets an entry at the token’s exp, even within its own age limit', () => {
    let now = 1_000_000_000_000;
    const cache = new VerifiedTokenCache({ now: () => now, maxAgeMs: 60_000 });
    cache.set('d', principal(now / 1000 + 10));
    expect(cache.get('d')?.company).toBe('1');
    now += 10_000;
    expect(cache.get('d')).toBeUndefined();
  });

  it('does not keep an already expired principal', () => {
    const now = 1_000_000_000_000;
    const cache = new VerifiedTokenCache({ now: () => now });
    cache.set('d', principal(now / 1000 - 1));
    expect(cache.get('d')).toBeUndefined();
  });

  it('is bounded: an entry not used for a whole generation goes first', () => {
    const cache = new VerifiedTokenCache({ maxEntries: 4 }); // generations of 2
    const exp = Date.now() / 1000 + 3600;
    cache.set('a', principal(exp, 'a'));
    cache.set('b', principal(exp, 'b'));
    cache.set('c', principal(exp, 'c')); // a generation of 2 is full: a and b are the older one
    expect(cache.get('b')?.company).toBe('b'); // used: kept into the new generation
    cache.set('d', principal(exp, 'd')); // full again: a, never used since, is gone
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')?.company).toBe('b');
    expect(cache.get('c')?.company).toBe('c');
    expect(cache.get('d')?.company).toBe('d');
  });

  it('refuses a bad size at construction', () => {
    expect(() => new VerifiedTokenCache({ maxEntries: 1 })).toThrow(TypeError);
  });
});

describe('the verifier never caches a failure', () => {
  it('a token refused as not yet valid is accepted once its nbf has come', async () => {
    const issuedAt = Math.floor(Date.now() / 1000);
    const notBefore = issuedAt + 120;
    const early = await new SignJWT({ company_id: 1, permissions: ['view_slab'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt(issuedAt)
      .setNotBefore(notBefore)
      .setExpirationTime(issuedAt + 3600)
      .sign(new TextEncoder().encode(DEV_SECRET));
    let now = issuedAt * 1000;
    const verifier = createTokenVerifier({ keys: DEV_KEYS, now: () => now });
    await expect(verifier.verify(early)).rejects.toBeInstanceOf(UnauthenticatedError);
    now = (notBefore + 1) * 1000;
    await expect(verifier.verify(early)).resolves.toMatchObject({ company: '1' });
  });

  it('a cached token stops being accepted when it expires', async () => {
    const minted = await token({ ttlSeconds: 60 });
    let now = Date.now();
    const verifier = createTokenVerifier({ keys: DEV_KEYS, now: () => now, clockToleranceSeconds: 0 });
    await expect(verifier.verify(minted)).resolves.toMatchObject({ company: '1' });
    now += 61_000;
    await expect(verifier.verify(minted)).rejects.toMatchObject({ code: 'unauthenticated', reason: 'expired' });
  });
});
