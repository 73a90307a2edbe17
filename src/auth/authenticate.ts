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
   * The synchronous path of a token verified recently: the credential, or its refusal (revoked), or
   * `undefined` when the token needs `authenticate` (not seen lately, or not a plain
   * `Bearer <token>` header). `connection` (the request's socket) lets a client that sends the same
   * header on every request of a keep-alive connection skip hashing it again.
   */
  authenticateCached(
    authorization: readonly string[] | undefined,
    connection?: object,
  ): Authenticated | UnauthenticatedError | undefined;
}

const BEARER_PREFIX = 'Bearer ';
/** Longer tokens are refused by the verifier (`oversized`): not hashed here. */
const MAX_HEADER_LENGTH = BEARER_PREFIX.length + MAX_TOKEN_BYTES;

/** An `Authorization` value a connection sent lately, and its token's digest. */
interface SeenHeader {
  readonly value: string;
  readonly digest: string;
}

/**
 * How many distinct headers a connection's memo holds: a client's connection carries one, and a
 * gateway's pooled connection the few credentials it multiplexes (the bench's 50 pages: four).
 */
const HEADERS_PER_CONNECTION = 4;

export function createAuthenticator(verifier: TokenVerifier, lists: AccessLists): Authenticator {
  /**
   * The verified-token cache is keyed by SHA-256 digests, never by tokens (src/auth/token-cache.ts),
   * and hashing a token is a large share of a hit's work in process. A client sends the same
   * header on every request of a connection, so the digests of the last few headers are kept with
   * the connection and reused when a header is the same text. It is only a memo of a pure
   * function: the principal is still looked up by the digest, with its `exp`, its 60 s bound and
   * the revocations checked on every request. Weak: it goes with the socket.
   */
  const seenHeaders = new WeakMap<object, SeenHeader[]>();

  function digestOf(value: string, token: string, connection: object | undefined): string {
    if (connection === undefined) return tokenDigest(token);
    let seen = seenHeaders.get(connection);
    if (seen === undefined) {
      seen = [];
      seenHeaders.set(connection, seen);
    }
    for (const header of seen) if (header.value === value) return header.digest;
    const digest = tokenDigest(token);
    if (seen.length >= HEADERS_PER_CONNECTION) seen.pop();
    seen.unshift({ value, digest });
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
      if (principal === undefined) return undefined;
      return lists.isRevoked(principal) ? new UnauthenticatedError('revoked') : { principal, token };
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
          return lists.isRevoked(principal) ? new UnauthenticatedError('revoked') : { principal, token: bearer.token };
        }
      }
    },
  };
}
