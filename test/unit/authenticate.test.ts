/**
 * The hit path's authentication (src/auth/authenticate.ts) with real HS256 tokens: the digest kept
 * with a connection is only ever reused for the same header text, so a connection that changes
 * tokens gets each token's own principal, or none; revocations still apply on every request.
 */
import { Socket } from 'node:net';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import type { AccessLists } from '../../src/auth/access-lists.js';
import { type Authenticated, createAuthenticator } from '../../src/auth/authenticate.js';
import { createTokenVerifier, tokenDigest } from '../../src/auth/verify-token.js';
import { DEV_SECRET, mintDevToken } from '../../src/cli/dev-credentials.js';
import { ProxyError } from '../../src/errors/proxy-error.js';

/** The principal the cached path gave, or `undefined` when it gave none or refused. */
function principalOf(identity: Authenticated | ProxyError | undefined) {
  return identity instanceof ProxyError ? undefined : identity?.principal;
}

/** Access lists revoking the digests in `revoked` (as an upstream 401 for a token without `jti` does). */
function listsRevoking(revoked: Set<string>): AccessLists {
  return {
    areKnown: () => true,
    isRevoked: (principal) => revoked.has(principal.tokenDigest),
    isCompanyBlocked: () => false,
    isEmployeeBlocked: () => false,
  };
}

async function setup() {
  const revoked = new Set<string>();
  const verifier = createTokenVerifier({ keys: { kind: 'secret', secret: DEV_SECRET } });
  const authenticator = createAuthenticator(verifier, listsRevoking(revoked));
  const alice = await mintDevToken({ company: 1, subject: 'alice' });
  const bob = await mintDevToken({ company: 2, subject: 'bob' });
  // Both verified once, as their first requests would be: the cached path knows them from then on.
  for (const token of [alice, bob]) {
    const verified = await authenticator.authenticate([`Bearer ${token}`]);
    expect(verified).not.toBeInstanceOf(ProxyError);
  }
  return { authenticator, alice, bob, revoked };
}

describe('authentication on the hit path', () => {
  it('gives each header on one connection its own token’s principal, in any order', async () => {
    const { authenticator, alice, bob } = await setup();
    const connection = new Socket();
    for (const [token, subject, company] of [
      [alice, 'alice', '1'],
      [alice, 'alice', '1'],
      [bob, 'bob', '2'],
      [alice, 'alice', '1'],
      [bob, 'bob', '2'],
      [bob, 'bob', '2'],
    ] as const) {
      const identity = authenticator.authenticateCached([`Bearer ${token}`], connection);
      expect(principalOf(identity)?.subject).toBe(subject);
      expect(principalOf(identity)?.company).toBe(company);
      expect(identity instanceof ProxyError ? undefined : identity?.token).toBe(token);
    }
  });

  it('keeps each of more tokens than its memo holds apart, rotating on one connection', async () => {
    const { authenticator } = await setup();
    const connection = new Socket();
    const tokens: string[] = [];
    for (let i = 1; i <= 6; i++) {
      const token = await mintDevToken({ company: i, subject: `user-${String(i)}` });
      expect(await authenticator.authenticate([`Bearer ${token}`])).not.toBeInstanceOf(ProxyError);
      tokens.push(token);
    }
    // Six credentials in turn, three times, over a memo of four per connection.
    for (let round = 0; round < 3; round++)
      for (const [i, token] of tokens.entries()) {
        const identity = authenticator.authenticateCached([`Bearer ${token}`], connection);
        expect(principalOf(identity)?.subject).toBe(`user-${String(i + 1)}`);
        expect(principalOf(identity)?.company).toBe(String(i + 1));
      }
  });

  it('never lends a connection’s last token to a header that differs from it by one character', async () => {
    const { authenticator, alice } = await setup();
    const connection = new Socket();
    expect(principalOf(authenticator.authenticateCached([`Bearer ${alice}`], connection))?.subject).toBe('alice');
    const tampered = `${alice.slice(0, -1)}${alice.endsWith('A') ? 'B' : 'A'}`;
    expect(authenticator.authenticateCached([`Bearer ${tampered}`], connection)).toBeUndefined();
    // And the full path refuses it.
    const verdict = await authenticator.authenticate([`Bearer ${tampered}`]);
    expect(verdict).toBeInstanceOf(ProxyError);
    expect(verdict instanceof ProxyError ? verdict.code : undefined).toBe('unauthenticated');
  });

  it('refuses a token revoked by digest on the very next request of a connection that sent it before, on the cached path itself', async () => {
    const { authenticator, alice, revoked } = await setup();
    const connection = new Socket();
    expect(principalOf(authenticator.authenticateCached([`Bearer ${alice}`], connection))?.subject).toBe('alice');
    revoked.add(tokenDigest(alice));
    const refused = authenticator.authenticateCached([`Bearer ${alice}`], connection);
    expect(refused).toBeInstanceOf(ProxyError);
    expect(refused instanceof ProxyError ? [refused.code, 'reason' in refused && refused.reason] : undefined).toEqual([
      'unauthenticated',
      'revoked',
    ]);
    const verdict = await authenticator.authenticate([`Bearer ${alice}`]);
    expect(verdict instanceof ProxyError ? verdict.code : undefined).toBe('unauthenticated');
  });

  it('takes the cached path only for one plain Bearer header', async () => {
    const { authenticator, alice } = await setup();
    const connection = new Socket();
    expect(authenticator.authenticateCached(undefined, connection)).toBeUndefined();
    expect(authenticator.authenticateCached([`Bearer ${alice}`, `Bearer ${alice}`], connection)).toBeUndefined();
    expect(authenticator.authenticateCached([`bearer ${alice}`], connection)).toBeUndefined();
    // Without a connection the digest is computed each time, with the same answer.
    expect(principalOf(authenticator.authenticateCached([`Bearer ${alice}`]))?.subject).toBe('alice');
  });
});

describe('an HMAC secret with several algorithms (each prepared once as a WebCrypto key)', () => {
  const secret = 'a-secret-long-enough-for-hs512-which-wants-64-bytes-of-key-material!';
  const sign = (alg: string, key: string = secret) =>
    new SignJWT({ company_id: 1, permissions: ['view_slab'] })
      .setProtectedHeader({ alg })
      .setSubject('s')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(key));

  it('verifies a token of each allowed algorithm, and refuses the others and a wrong key', async () => {
    const verifier = createTokenVerifier({
      keys: { kind: 'secret', secret, algorithms: ['HS256', 'HS384', 'HS512'] },
      cache: false,
    });
    for (const alg of ['HS256', 'HS384', 'HS512']) {
      expect((await verifier.verify(await sign(alg))).company).toBe('1');
    }
    const only256 = createTokenVerifier({ keys: { kind: 'secret', secret, algorithms: ['HS256'] }, cache: false });
    await expect(only256.verify(await sign('HS512'))).rejects.toMatchObject({ reason: 'algorithm' });
    await expect(only256.verify(await sign('HS256', `${secret}!`))).rejects.toMatchObject({ reason: 'signature' });
  });
});
