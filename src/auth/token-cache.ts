/**
 * A bounded in-process cache of verified tokens, so that a cache hit does not pay for signature
 * verification (docs/architecture.md#jose). Keyed by a SHA-256 digest of the token, never the token;
 * entries live until min(exp, 60 s); failures are never cached, so a revoked key or a fixed clock
 * takes effect at once. Process memory only, never Redis (docs/credentials.md).
 */
import { RecentMap } from '../platform/recent-map.js';
import type { Principal } from './principal.js';

export interface TokenCacheOptions {
  /** Most tokens held (default 10 000; src/platform/recent-map.ts says which go first). */
  readonly maxEntries?: number;
  /** Longest time a verification is trusted, ms (default 60 000). */
  readonly maxAgeMs?: number;
  readonly now?: () => number;
}

/** A verification, trusted until `until` (ms): the token's `exp` or the cache's bound, whichever is first. */
interface Verified {
  readonly principal: Principal;
  readonly until: number;
}

export class VerifiedTokenCache {
  readonly #entries: RecentMap<string, Verified>;
  readonly #maxAgeMs: number;
  readonly #now: () => number;

  constructor(options: TokenCacheOptions = {}) {
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 2)
      throw new TypeError('maxEntries must be an integer of at least 2');
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    this.#entries = new RecentMap({ maxSize: maxEntries });
  }

  get(digest: string): Principal | undefined {
    const verified = this.#entries.get(digest);
    if (verified === undefined) return undefined;
    // Checked on every use: a token is never trusted past its exp or the bound.
    if (verified.until <= this.#now()) {
      this.#entries.delete(digest);
      return undefined;
    }
    return verified.principal;
  }

  set(digest: string, principal: Principal): void {
    const at = this.#now();
    const until = Math.min(principal.expiresAt * 1000, at + this.#maxAgeMs);
    if (until > at) this.#entries.set(digest, { principal, until });
  }
}
