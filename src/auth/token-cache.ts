/**
 * A bounded in-process cache of verified tokens, so that a cache hit does not pay for signature
 * verification (50–100 µs, docs/architecture.md#jose). Keyed by a SHA-256 digest of the token, never the token;
 * entries live until min(exp, 60 s); failures are never cached, so a revoked key or a fixed clock
 * takes effect at once. Process memory only, never Redis (README, "Credentials and permissions").
 */
import { LRUCache } from 'lru-cache';
import type { Principal } from './principal.js';

export interface TokenCacheOptions {
  /** Most tokens kept (default 10 000). */
  readonly maxEntries?: number;
  /** Longest time a verification is trusted, ms (default 60 000). */
  readonly maxAgeMs?: number;
  readonly now?: () => number;
}

export class VerifiedTokenCache {
  readonly #entries: LRUCache<string, Principal>;
  readonly #maxAgeMs: number;
  readonly #now: () => number;

  constructor(options: TokenCacheOptions = {}) {
    const maxEntries = options.maxEntries ?? 10_000;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new TypeError('maxEntries must be a positive integer');
    this.#maxAgeMs = options.maxAgeMs ?? 60_000;
    this.#now = options.now ?? Date.now;
    this.#entries = new LRUCache({ max: maxEntries });
  }

  get(digest: string): Principal | undefined {
    const principal = this.#entries.get(digest);
    if (principal === undefined) return undefined;
    // exp is re-checked on every use: the LRU's own clock is only an upper bound.
    if (principal.expiresAt * 1000 <= this.#now()) {
      this.#entries.delete(digest);
      return undefined;
    }
    return principal;
  }

  set(digest: string, principal: Principal): void {
    const ttl = Math.min(principal.expiresAt * 1000 - this.#now(), this.#maxAgeMs);
    if (ttl > 0) this.#entries.set(digest, principal, { ttl });
  }

  clear(): void {
    this.#entries.clear();
  }
}
