/**
 * Authentication as one step of the request flow: bearer header → verified principal → not
 * revoked. Returns the principal or the error to answer with (400 for two headers, else 401).
 */
import { InvalidBearerRequestError, type ProxyError, UnauthenticatedError } from '../errors/proxy-error.js';
import type { AccessLists } from './access-lists.js';
import { readBearer } from './bearer.js';
import type { Principal } from './principal.js';
import type { TokenVerifier } from './verify-token.js';

export interface Authenticated {
  readonly principal: Principal;
  /** The bearer token as sent, for forwarding on a miss only. */
  readonly token: string;
}

export interface Authenticator {
  authenticate(authorization: readonly string[] | undefined): Promise<Authenticated | ProxyError>;
  /**
   * The synchronous path of a token verified recently: the answer, or `undefined` when the token
   * needs `authenticate` (not seen lately, or not a plain `Bearer <token>` header).
   */
  authenticateCached(authorization: readonly string[] | undefined): Authenticated | undefined;
}

const BEARER_PREFIX = 'Bearer ';

export function createAuthenticator(verifier: TokenVerifier, lists: AccessLists): Authenticator {
  return {
    authenticateCached(authorization) {
      // Only the common spelling takes this path; every other one gets the full grammar check.
      const value = authorization?.length === 1 ? authorization[0] : undefined;
      if (value === undefined || !value.startsWith(BEARER_PREFIX)) return undefined;
      const token = value.slice(BEARER_PREFIX.length);
      // A cached digest means this exact text was verified as a compact JWS: the grammar holds.
      const principal = verifier.cached(token);
      if (principal === undefined || lists.isRevoked(principal) || lists.isTokenRevoked(token)) return undefined;
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
          const revoked = lists.isRevoked(principal) || lists.isTokenRevoked(bearer.token);
          return revoked ? new UnauthenticatedError('revoked') : { principal, token: bearer.token };
        }
      }
    },
  };
}
