/**
 * Authentication as one step of the request flow: bearer header → verified principal → not
 * revoked. Returns the principal or the error to answer with (400 for two headers, else 401).
 */
import { InvalidBearerRequestError, type ProxyError, UnauthenticatedError } from '../errors/proxy-error.js';
import type { AccessLists } from './access-lists.js';
import { readBearer } from './bearer.js';
import type { Principal } from './principal.js';
import { MAX_TOKEN_BYTES, type TokenVerifier, tokenDigest } from './verify-token.js';

export interface Authenticated {
  readonly principal: Principal;
  /** The bearer token as sent, for forwarding on a miss only. */
  readonly token: string;
}

export interface Authenticator {
  authenticate(authorization: readonly string[] | undefined): Promise<Authenticated | ProxyError>;
  /**
   * The synchronous path of a token verified recently: the answer, or `undefined` when the token
   * needs `authenticate` (not seen lately, or not a plain `Bearer <token>` header). `connection`
   * (the request's socket) lets a client that sends the same header on every request of a
   * keep-alive connection skip hashing it again.
   */
  authenticateCached(authorization: readonly string[] | undefined, connection?: object): Authenticated | undefined;
}

const BEARER_PREFIX = 'Bearer ';
/** Longer tokens are refused by the verifier (`oversized`): not hashed here. */
const MAX_HEADER_LENGTH = BEARER_PREFIX.length + MAX_TOKEN_BYTES;

/** The last `Authorization` value a connection sent, and its token's digest. */
interface LastHeader {
  readonly value: string;
  readonly digest: string;
}

export function createAuthenticator(verifier: TokenVerifier, lists: AccessLists): Authenticator {
  /**
   * The verified-token cache is keyed by SHA-256 digests, never by tokens (src/auth/token-cache.ts),
   * and hashing the token was a tenth of a hit's work in process (issue 11). A client sends the same
   * header on every request of a connection, so the digest of the last one is kept with the
   * connection and reused when the next header is the same text. It is only a memo of a pure
   * function: the principal is still looked up by the digest, with its `exp`, its 60 s bound and
   * the revocations checked on every request. Weak: it goes with the socket.
   */
  const lastHeaders = new WeakMap<object, LastHeader>();

  function digestOf(value: string, token: string, connection: object | undefined): string {
    if (connection === undefined) return tokenDigest(token);
    const last = lastHeaders.get(connection);
    if (last !== undefined && last.value === value) return last.digest;
    const digest = tokenDigest(token);
    lastHeaders.set(connection, { value, digest });
    return digest;
  }

  return {
    authenticateCached(authorization, connection) {
      // Only the common spelling takes this path; every other one gets the full grammar check.
      const value = authorization?.length === 1 ? authorization[0] : undefined;
      if (value === undefined || !value.startsWith(BEARER_PREFIX) || value.length > MAX_HEADER_LENGTH) return undefined;
      const token = value.slice(BEARER_PREFIX.length);
      const digest = digestOf(value, token, connection);
      // A cached digest means this exact text was verified as a compact JWS: the grammar holds.
      const principal = verifier.cachedByDigest(digest);
      if (principal === undefined || lists.isRevoked(principal) || lists.isTokenRevoked(digest)) return undefined;
      return { principal, token };
    },
    async authenticate(authorization) {
      const bearer = readBearer(authorization);
      switch (bearer.kind) {
        case 'missing':
          return new UnauthenticatedError('missing');
        case 'malformed':
          return new UnauthenticatedError('malformed');
        case 'duplicate':
          return new InvalidBearerRequestError('The request carries more than one Authorization header.');
        case 'token': {
          let principal: Principal;
          try {
            principal = await verifier.verify(bearer.token);
          } catch (error) {
            if (error instanceof UnauthenticatedError) return error;
            throw error;
          }
          const revoked = lists.isRevoked(principal) || lists.isTokenRevoked(tokenDigest(bearer.token));
          return revoked ? new UnauthenticatedError('revoked') : { principal, token: bearer.token };
        }
      }
    },
  };
}
