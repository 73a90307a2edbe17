/**
 * Where verification keys come from (docs/credentials.md): a remote JWKS, one public key (PEM or JWK), or an
 * HMAC secret. Algorithms are pinned here, from the key type unless `JWT_ALGORITHMS` says otherwise,
 * and a combination that would allow algorithm confusion (`none`, HS* with a public key) stops the
 * start: the factory fails fast, naming the option (the jose pattern).
 */
import { createPublicKey, createSecretKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, type JWTVerifyGetKey, errors as joseErrors } from 'jose';

export type KeySourceOptions =
  | { readonly kind: 'secret'; readonly secret: string; readonly algorithms?: readonly string[] }
  /** `key` is a PEM (SPKI or certificate) or a JWK in JSON. */
  | { readonly kind: 'public-key'; readonly key: string; readonly algorithms?: readonly string[] }
  | {
      readonly kind: 'jwks';
      readonly url: string;
      readonly algorithms?: readonly string[];
      /** Wait after an unknown `kid` before fetching the set again (jose's default: 30 s). */
      readonly cooldownMs?: number;
      /** Background refresh period; a failed refresh keeps the keys already known. */
      readonly refreshMs?: number;
      readonly timeoutMs?: number;
    };

export interface VerificationKey {
  readonly algorithms: readonly string[];
  readonly key: KeyObject | JWTVerifyGetKey;
  /** Stops background work (the JWKS refresh timer). */
  close(): void;
}

export class KeySourceError extends Error {
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`);
  }
}

const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'];
const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];
/** RFC 7518 §3.2: an HMAC key must be at least as long as the hash output. */
const MIN_SECRET_BYTES: Readonly<Record<string, number>> = { HS256: 32, HS384: 48, HS512: 64 };

function checkAlgorithms(
  option: string,
  requested: readonly string[] | undefined,
  allowed: readonly string[],
  fallback: readonly string[],
): readonly string[] {
  const algorithms = requested ?? fallback;
  if (algorithms.length === 0) throw new KeySourceError(option, 'no algorithm is allowed');
  for (const alg of algorithms) {
    if (!allowed.includes(alg)) {
      throw new KeySourceError(
        'JWT_ALGORITHMS',
        `${alg} cannot be used with this key source (allowed: ${allowed.join(', ')})`,
      );
    }
  }
  return algorithms;
}

/** The algorithms a public key of this type can verify: one family, never HMAC, never `none`. */
function algorithmsForKey(key: KeyObject, jwkAlg: string | undefined): { allowed: string[]; fallback: string[] } {
  if (jwkAlg !== undefined) return { allowed: [jwkAlg], fallback: [jwkAlg] };
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return { allowed: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'], fallback: ['RS256'] };
    case 'rsa-pss':
      return { allowed: ['PS256', 'PS384', 'PS512'], fallback: ['PS256'] };
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      const alg =
        curve === 'prime256v1'
          ? 'ES256'
          : curve === 'secp384r1'
            ? 'ES384'
            : curve === 'secp521r1'
              ? 'ES512'
              : undefined;
      if (alg === undefined) throw new KeySourceError('JWT_PUBLIC_KEY', `unsupported EC curve ${String(curve)}`);
      return { allowed: [alg], fallback: [alg] };
    }
    case 'ed25519':
      return { allowed: ['EdDSA', 'Ed25519'], fallback: ['EdDSA', 'Ed25519'] };
    default:
      throw new KeySourceError('JWT_PUBLIC_KEY', `unsupported key type ${String(key.asymmetricKeyType)}`);
  }
}

function parsePublicKey(text: string): { key: KeyObject; jwkAlg: string | undefined } {
  const trimmed = text.trim();
  try {
    if (trimmed.startsWith('{')) {
      const jwk: unknown = JSON.parse(trimmed);
      if (typeof jwk !== 'object' || jwk === null || !('kty' in jwk)) throw new Error('not a JWK');
      if (jwk.kty === 'oct')
        throw new KeySourceError('JWT_PUBLIC_KEY', 'a symmetric JWK is not a public key; use JWT_SECRET');
      const alg = 'alg' in jwk && typeof jwk.alg === 'string' ? jwk.alg : undefined;
      // Only the public members: a private JWK must not turn into a signing key here.
      const key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
      return { key, jwkAlg: alg };
    }
    return { key: createPublicKey(trimmed), jwkAlg: undefined };
  } catch (error) {
    if (error instanceof KeySourceError) throw error;
    throw new KeySourceError('JWT_PUBLIC_KEY', 'not a PEM public key or a JWK');
  }
}

/**
 * An HMAC secret as WebCrypto keys, made once per allowed algorithm. jose turns a secret
 * `KeyObject` back into bytes and imports them again on every verification, which a crowd of new
 * tokens would pay for in full; `toCryptoKey` (Node ≥ 22.10) makes the key synchronously here.
 */
function preparedHmacKeys(secret: KeyObject, algorithms: readonly string[]): JWTVerifyGetKey {
  const keys = new Map(
    algorithms.map((alg) => [
      alg,
      secret.toCryptoKey({ name: 'HMAC', hash: `SHA-${alg.slice(2)}` }, false, ['verify']),
    ]),
  );
  return (header) => {
    const key = keys.get(header.alg ?? '');
    // jose checks the algorithm against the allowed list before it asks for a key.
    if (key === undefined)
      throw new joseErrors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
    return key;
  };
}

export function createVerificationKey(options: KeySourceOptions): VerificationKey {
  switch (options.kind) {
    case 'secret': {
      const algorithms = checkAlgorithms('JWT_SECRET', options.algorithms, HMAC_ALGORITHMS, ['HS256']);
      const bytes = Buffer.byteLength(options.secret);
      for (const alg of algorithms) {
        const min = MIN_SECRET_BYTES[alg] ?? 32;
        if (bytes < min) throw new KeySourceError('JWT_SECRET', `must be at least ${min} bytes for ${alg}`);
      }
      return {
        algorithms,
        key: preparedHmacKeys(createSecretKey(Buffer.from(options.secret)), algorithms),
        close() {},
      };
    }
    case 'public-key': {
      const { key, jwkAlg } = parsePublicKey(options.key);
      if (jwkAlg !== undefined && !ASYMMETRIC_ALGORITHMS.includes(jwkAlg)) {
        throw new KeySourceError('JWT_PUBLIC_KEY', `the JWK's alg ${jwkAlg} is not an asymmetric algorithm`);
      }
      const { allowed, fallback } = algorithmsForKey(key, jwkAlg);
      const algorithms = checkAlgorithms('JWT_PUBLIC_KEY', options.algorithms, allowed, fallback);
      return { algorithms, key, close() {} };
    }
    case 'jwks': {
      let url: URL;
      try {
        url = new URL(options.url);
      } catch {
        throw new KeySourceError('JWT_JWKS_URL', 'not a URL');
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:')
        throw new KeySourceError('JWT_JWKS_URL', 'must be http(s)');
      const algorithms = checkAlgorithms(
        'JWT_JWKS_URL',
        options.algorithms,
        ASYMMETRIC_ALGORITHMS,
        ASYMMETRIC_ALGORITHMS,
      );
      // cacheMaxAge Infinity: jose's default (10 min) makes every verification fail once the set is
      // old and the endpoint is down (docs/architecture.md#jose). Freshness comes from the refresh timer instead, and
      // a failed refresh keeps the set already known; rotation comes from the unknown-`kid` reload.
      const jwks = createRemoteJWKSet(url, {
        cacheMaxAge: Number.POSITIVE_INFINITY,
        cooldownDuration: options.cooldownMs ?? 30_000,
        timeoutDuration: options.timeoutMs ?? 5_000,
      });
      const timer = setInterval(() => {
        jwks.reload().catch(() => undefined); // keep the known keys; the next tick tries again
      }, options.refreshMs ?? 300_000);
      timer.unref();
      return { algorithms, key: jwks, close: () => clearInterval(timer) };
    }
  }
}
