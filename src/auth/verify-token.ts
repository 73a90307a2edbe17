/**
 * Token verification (docs/credentials.md): size and shape checks before any crypto, jose with pinned
 * algorithms, required `exp`, issuer and audience when configured, clock tolerance, then claim
 * validation into a `Principal`. Every failure is an `UnauthenticatedError` with an internal reason;
 * no jose message or payload ever leaves this module (jose errors carry the claims, docs/architecture.md#jose).
 */
import { hash } from 'node:crypto';
import { type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import { UnauthenticatedError, type UnauthenticatedReason } from '../errors/proxy-error.js';
import { ClaimError, type ClaimNames, DEFAULT_CLAIM_NAMES, principalFromClaims } from './claims.js';
import { createVerificationKey, type KeySourceOptions } from './key-source.js';
import type { Principal } from './principal.js';
import { VerifiedTokenCache } from './token-cache.js';

/** Tokens longer than this are refused before any parsing (docs/credentials.md). */
export const MAX_TOKEN_BYTES = 8 * 1024;
const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface TokenVerifierOptions {
  readonly keys: KeySourceOptions;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  /** Seconds of tolerance on `exp`, `nbf` and `iat` (default 30). */
  readonly clockToleranceSeconds?: number;
  readonly claims?: ClaimNames;
  readonly cache?: VerifiedTokenCache | false;
  readonly now?: () => number;
}

export interface TokenVerifier {
  verify(token: string): Promise<Principal>;
  /**
   * The principal of a token verified recently (the hit path's synchronous check), if any, by the
   * token's digest (`tokenDigest`).
   */
  cachedByDigest(digest: string): Principal | undefined;
  close(): void;
}

/**
 * jose decodes base64url leniently: a segment with non-zero trailing bits, or one whose length is
 * 1 mod 4, decodes all the same, so one signature has several spellings. Only the canonical one is
 * accepted, so that a token has exactly one form (and one cache digest).
 */
function isCanonicalBase64url(segment: string): boolean {
  if (segment.length % 4 === 1) return false;
  return Buffer.from(segment, 'base64url').toString('base64url') === segment;
}

function hasCanonicalShape(token: string): boolean {
  if (!JWS_COMPACT.test(token)) return false;
  const [header, payload, signature] = token.split('.') as [string, string, string];
  return isCanonicalBase64url(header) && isCanonicalBase64url(payload) && isCanonicalBase64url(signature);
}

function reasonFor(error: unknown): UnauthenticatedReason {
  if (error instanceof ClaimError) return 'claims';
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf' || error.claim === 'iat') return 'not_yet_valid';
    if (error.claim === 'iss') return 'issuer';
    if (error.claim === 'aud') return 'audience';
    return 'claims';
  }
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) return 'algorithm';
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'signature';
  if (error instanceof joseErrors.JWKSTimeout || error instanceof joseErrors.JWKSNoMatchingKey)
    return 'key_unavailable';
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return 'malformed';
  return 'key_unavailable';
}

export function tokenDigest(token: string): string {
  return hash('sha256', token, 'base64url'); // one-shot: half the cost of createHash here
}

export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const key = createVerificationKey(options.keys);
  const tolerance = options.clockToleranceSeconds ?? 30;
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new TypeError('clockToleranceSeconds must be a non-negative number');
  const claimNames = options.claims ?? DEFAULT_CLAIM_NAMES;
  const now = options.now ?? Date.now;
  // The cache re-checks `exp` against the same clock the verifier uses.
  const cache = options.cache === false ? undefined : (options.cache ?? new VerifiedTokenCache({ now }));
  const verifyOptions = {
    algorithms: [...key.algorithms],
    requiredClaims: ['exp'],
    clockTolerance: tolerance,
    ...(options.issuer !== undefined && { issuer: options.issuer }),
    ...(options.audience !== undefined && { audience: options.audience }),
    currentDate: undefined as Date | undefined,
  };

  async function verifyUncached(token: string, digest: string): Promise<Principal> {
    if (!hasCanonicalShape(token)) throw new UnauthenticatedError('malformed');
    let payload: JWTPayload;
    try {
      const checkedAt = new Date(now());
      const result =
        typeof key.key === 'function'
          ? await jwtVerify(token, key.key, { ...verifyOptions, currentDate: checkedAt })
          : await jwtVerify(token, key.key, { ...verifyOptions, currentDate: checkedAt });
      payload = result.payload;
    } catch (error) {
      throw new UnauthenticatedError(reasonFor(error));
    }
    // jose accepts an `iat` in the future unless maxTokenAge is set: a token issued "later" is
    // either a clock fault or a forgery's tell.
    if (payload.iat !== undefined && payload.iat > now() / 1000 + tolerance)
      throw new UnauthenticatedError('not_yet_valid');
    try {
      return principalFromClaims(payload, claimNames, digest);
    } catch (error) {
      throw new UnauthenticatedError(reasonFor(error));
    }
  }

  return {
    async verify(token: string): Promise<Principal> {
      if (token.length > MAX_TOKEN_BYTES) throw new UnauthenticatedError('oversized');
      const digest = tokenDigest(token);
      const cached = cache?.get(digest);
      if (cached !== undefined) return cached;
      const principal = await verifyUncached(token, digest);
      cache?.set(digest, principal);
      return principal;
    },
    cachedByDigest(digest: string): Principal | undefined {
      return cache?.get(digest);
    },
    close: () => key.close(),
  };
}
