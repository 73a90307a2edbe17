/**
 * Inbound limits (docs/limits.md#inbound-limits): per credential and per company, `points` per `duration` seconds,
 * shared by every replica through Redis (rate-limiter-flexible: one key per client, atomic).
 * Points are leased, one owner per policy (src/limits/leased-window.ts): a replica reserves a small
 * batch in one Redis call and spends it in process, so most decisions are synchronous and cost no
 * round trip. When Redis is unavailable — not configured, down, or inside this limiter's breaker
 * pause after a failure — each replica enforces its share, `points / rateLimit.replicas`, in
 * process (src/limits/local-limits.ts), and returns to the shared count by itself.
 *
 * Every decision carries the IETF RateLimit fields (src/limits/limit-verdict.ts).
 */
import type { Principal } from '../auth/principal.js';
import type { RedisClient } from '../platform/redis/connection.js';
import type { RedisHealth } from '../platform/redis/health.js';
import { LeasedWindow, redisCount } from './leased-window.js';
import {
  formatPolicyHeader,
  type LimitVerdict,
  type PolicyCount,
  type PolicyKeys,
  type PolicyName,
  type RatePolicy,
  verdictOf,
} from './limit-verdict.js';
import { LocalLimits } from './local-limits.js';

export interface InboundLimitsOptions {
  readonly perCredential: RatePolicy;
  readonly perCompany: RatePolicy;
  /**
   * Replicas sharing the limits: each one's fallback share is `points / replicas`. The configured
   * number, until the replicas have been counted (`liveReplicas`).
   */
  readonly replicas: number;
  /** The replicas counted through Redis, when they have been (src/platform/redis/replica-count.ts). */
  readonly liveReplicas?: (() => number | undefined) | undefined;
  readonly redis?:
    | {
        readonly client: RedisClient;
        readonly health: RedisHealth;
        readonly prefix: string;
        /** The longest a decision waits for Redis before deciding on the local share, ms. */
        readonly timeoutMs: number;
      }
    | undefined;
  readonly now?: () => number;
}

export interface InboundLimiter {
  /** A verdict now when no shared store is in use, else a promise of one. */
  decide(principal: Principal): LimitVerdict | Promise<LimitVerdict>;
}

/** Keys per principal: principals are reused from the verified-token cache, so this is a lookup. */
const KEYS = new WeakMap<Principal, PolicyKeys>();

function keysOf(principal: Principal): PolicyKeys {
  let keys = KEYS.get(principal);
  if (keys === undefined) {
    // Credential ids are free text: encoded, so a key cannot run into another's.
    keys = {
      credential: `${principal.company}:${Buffer.from(principal.credential).toString('base64url')}`,
      company: principal.company,
    };
    KEYS.set(principal, keys);
  }
  return keys;
}

interface SharedLimitsParts {
  readonly credential: LeasedWindow;
  readonly company: LeasedWindow;
  readonly local: LocalLimits;
  readonly health: RedisHealth;
  readonly timeoutMs: number;
  readonly policyHeader: string;
}

/**
 * The limits counted in Redis: a request is counted from each policy's leases, the credential
 * first. A decision that waits for Redis waits one command timeout at most; it, and every decision
 * while Redis is unusable, is then decided on this replica's share.
 */
class SharedLimits implements InboundLimiter {
  readonly #credential: LeasedWindow;
  readonly #company: LeasedWindow;
  readonly #local: LocalLimits;
  readonly #health: RedisHealth;
  readonly #timeoutMs: number;
  readonly #policyHeader: string;

  constructor(parts: SharedLimitsParts) {
    this.#credential = parts.credential;
    this.#company = parts.company;
    this.#local = parts.local;
    this.#health = parts.health;
    this.#timeoutMs = parts.timeoutMs;
    this.#policyHeader = parts.policyHeader;
  }

  decide(principal: Principal): LimitVerdict | Promise<LimitVerdict> {
    if (!this.#health.usable()) return this.#local.decide(keysOf(principal));
    const keys = keysOf(principal);
    // The credential first: a request it refuses does not spend its company's allowance.
    const credential = this.#credential.count(keys.credential);
    if (credential instanceof Promise) {
      return this.#bounded(
        keys,
        credential.then((c) => this.#withCompany(keys, c)),
      );
    }
    if (credential.consumed > credential.points) return verdictOf([credential], this.#policyHeader);
    const company = this.#company.count(keys.company);
    if (!(company instanceof Promise)) return verdictOf([credential, company], this.#policyHeader); // no Redis at all
    return this.#bounded(
      keys,
      company.then((c) => (c === undefined ? undefined : [credential, c])),
    );
  }

  /** The counts once the credential's came from Redis: the company's too, unless the credential refused. */
  async #withCompany(keys: PolicyKeys, credential: PolicyCount | undefined): Promise<PolicyCount[] | undefined> {
    if (credential === undefined) return undefined;
    if (credential.consumed > credential.points) return [credential];
    const company = await this.#company.count(keys.company);
    return company === undefined ? undefined : [credential, company];
  }

  /** Bounds a decision that waits for Redis by one command timeout, then decides on the share. */
  #bounded(keys: PolicyKeys, counted: Promise<PolicyCount[] | undefined>): Promise<LimitVerdict> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        this.#health.failed();
        resolve(undefined);
      }, this.#timeoutMs);
    });
    return Promise.race([counted, late]).then((counts) => {
      clearTimeout(timer);
      const [first, ...rest] = counts ?? [];
      return first === undefined ? this.#local.decide(keys) : verdictOf([first, ...rest], this.#policyHeader);
    });
  }
}

export function createInboundLimiter(options: InboundLimitsOptions): InboundLimiter {
  const { perCredential, perCompany, replicas, redis } = options;
  if (!Number.isInteger(replicas) || replicas < 1) throw new TypeError('rateLimit.replicas must be a positive integer');
  const policyHeader = formatPolicyHeader(perCredential, perCompany);
  const replicasNow = (): number => options.liveReplicas?.() ?? replicas;
  // The local windows hold this replica's share only when a shared count exists elsewhere; the
  // share follows the replicas counted (the most of the last minutes), read when a decision is made here (Redis unusable).
  const local = new LocalLimits({
    perCredential,
    perCompany,
    sharedAmong: redis === undefined ? undefined : replicasNow,
    policyHeader,
    now: options.now,
  });
  if (redis === undefined) return { decide: (principal) => local.decide(keysOf(principal)) };
  const now = options.now ?? Date.now;
  const leased = (name: PolicyName, policy: RatePolicy): LeasedWindow =>
    new LeasedWindow({
      name,
      points: policy.points,
      shared: redisCount(name, policy, redis),
      health: redis.health,
      replicas: replicasNow,
      now,
    });
  return new SharedLimits({
    credential: leased('credential', perCredential),
    company: leased('company', perCompany),
    local,
    health: redis.health,
    timeoutMs: redis.timeoutMs,
    policyHeader,
  });
}
