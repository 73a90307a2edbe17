/**
 * Inbound limits (docs/limits.md#inbound-limits): per credential and per company, `points` per `duration` seconds,
 * shared by every replica through Redis (rate-limiter-flexible: one key per client, atomic).
 * Points are leased: a replica reserves a small batch in one Redis call and spends it in process,
 * so most decisions are synchronous and cost no round trip (a Redis call per decision measured
 * ~65 µs of CPU, more than a whole cache hit). When Redis is unavailable — not configured, down,
 * or inside this limiter's breaker pause after a failure — each replica enforces its share,
 * `points / rateLimit.replicas`, in process, and returns to the shared count by itself.
 *
 * Every decision carries the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers-11):
 * `RateLimit-Policy` lists both policies; `RateLimit` gives the tighter one's remaining quota.
 */
import type { RateLimitPolicy } from '../errors/proxy-error.js';
import { secondsToWait } from './retry-after.js';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Principal } from '../auth/principal.js';
import type { RedisClient, RedisHealth } from '../platform/redis.js';
import { LocalWindowLimiter } from './local-window.js';

/** The inbound limits' policies: the ones a replica decides itself (not the upstream's 429). */
export type PolicyName = Exclude<RateLimitPolicy, 'upstream'>;

export interface RatePolicy {
  readonly points: number;
  readonly duration: number;
}

export interface InboundLimitsOptions {
  readonly perCredential: RatePolicy;
  readonly perCompany: RatePolicy;
  /**
   * Replicas sharing the limits: each one's fallback share is `points / replicas`. The configured
   * number, until the replicas have been counted (`liveReplicas`).
   */
  readonly replicas: number;
  /** The replicas counted through Redis, when they have been (src/platform/replica-count.ts). */
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

export interface LimitVerdict {
  readonly allowed: boolean;
  /** `RateLimit-Policy` and `RateLimit` header values. */
  readonly policyHeader: string;
  readonly rateLimitHeader: string;
  /** Refusals: the policy that refused, and whole seconds until it allows again (never early). */
  readonly refusedBy: PolicyName | undefined;
  readonly retryAfterSeconds: number;
}

export interface InboundLimiter {
  /** A verdict now when no shared store is in use, else a promise of one. */
  decide(principal: Principal): LimitVerdict | Promise<LimitVerdict>;
}

interface PolicyCount {
  readonly name: PolicyName;
  readonly points: number;
  readonly consumed: number;
  readonly msBeforeNext: number;
}

/** Structured-field string: quotes and backslashes escaped (RFC 9651 §3.3.3). */
function sfString(text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** The policies' names as structured-field strings, made once (the `RateLimit` field of every answer names one). */
const POLICY_NAMES: Readonly<Record<PolicyName, string>> = {
  credential: sfString('credential'),
  company: sfString('company'),
};

export function formatPolicyHeader(perCredential: RatePolicy, perCompany: RatePolicy): string {
  return `${POLICY_NAMES.credential};q=${perCredential.points};w=${perCredential.duration}, ${POLICY_NAMES.company};q=${perCompany.points};w=${perCompany.duration}`;
}

/**
 * The verdict of the counts taken: refused by any policy over its points; headers for the tighter
 * one. A request the credential policy refuses is not counted against its company (only one count).
 */
export function verdictOf(counts: readonly [PolicyCount, ...PolicyCount[]], policyHeader: string): LimitVerdict {
  const remaining = (c: PolicyCount): number => Math.max(0, c.points - c.consumed);
  // One pass, no arrays (this runs on every hit): the tighter policy is the one with fewer
  // requests left, then the longer wait; a refusal waits for the last exceeded window to reset.
  let tighter = counts[0];
  let refusing: PolicyCount | undefined;
  for (const c of counts) {
    const left = remaining(c) - remaining(tighter);
    if (left < 0 || (left === 0 && c.msBeforeNext > tighter.msBeforeNext)) tighter = c;
    if (c.consumed > c.points && (refusing === undefined || c.msBeforeNext > refusing.msBeforeNext)) refusing = c;
  }
  const shown = refusing ?? tighter;
  return {
    allowed: refusing === undefined,
    policyHeader,
    rateLimitHeader: `${POLICY_NAMES[shown.name]};r=${remaining(shown)};t=${secondsToWait(shown.msBeforeNext)}`,
    refusedBy: refusing?.name,
    retryAfterSeconds: refusing === undefined ? 0 : secondsToWait(refusing.msBeforeNext),
  };
}

/** The first batch a replica reserves of a key's points (never more than the largest, below). */
const FIRST_BATCH = 100;
/** How long a batch should last at the key's demand: far longer than a Redis round trip under load. */
const LEASE_TARGET_MS = 100;

/** Keys per principal: principals are reused from the verified-token cache, so this is a lookup. */
const KEYS = new WeakMap<Principal, { readonly credential: string; readonly company: string }>();

function keysOf(principal: Principal): { readonly credential: string; readonly company: string } {
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

export function createInboundLimiter(options: InboundLimitsOptions): InboundLimiter {
  const { perCredential, perCompany, replicas } = options;
  if (!Number.isInteger(replicas) || replicas < 1) throw new TypeError('rateLimit.replicas must be a positive integer');
  const policyHeader = formatPolicyHeader(perCredential, perCompany);
  const replicasNow = (): number => options.liveReplicas?.() ?? replicas;
  const shareOf = (policy: RatePolicy): number => Math.max(1, Math.floor(policy.points / replicasNow()));
  const clock = options.now === undefined ? {} : { now: options.now };
  const policies = { credential: perCredential, company: perCompany };
  // The local windows hold this replica's share only when a shared count exists elsewhere; the
  // share follows the replicas counted (the most of the last minutes), read when a decision is made here (Redis unusable).
  const localPoints = (name: PolicyName): number => {
    const policy = policies[name];
    return options.redis === undefined ? policy.points : shareOf(policy);
  };
  const local = {
    credential: new LocalWindowLimiter(perCredential.duration, clock),
    company: new LocalWindowLimiter(perCompany.duration, clock),
  };

  function decideLocally(principal: Principal): LimitVerdict {
    const keys = keysOf(principal);
    const credential: PolicyCount = {
      name: 'credential',
      points: localPoints('credential'),
      ...local.credential.consume(keys.credential),
    };
    // A credential over its own limit does not spend its company's allowance (and its colleagues').
    if (credential.consumed > credential.points) return verdictOf([credential], policyHeader);
    return verdictOf(
      [credential, { name: 'company', points: localPoints('company'), ...local.company.consume(keys.company) }],
      policyHeader,
    );
  }

  const redis = options.redis;
  if (redis === undefined) return { decide: decideLocally };
  const { health } = redis;
  const now = options.now ?? Date.now;

  const shared = (name: PolicyName, policy: RatePolicy): RateLimiterRedis =>
    new RateLimiterRedis({
      storeClient: redis.client,
      keyPrefix: `${redis.prefix}:rl:${name}`,
      points: policy.points,
      duration: policy.duration,
      rejectIfRedisNotReady: true,
    });
  const limiters = { credential: shared('credential', perCredential), company: shared('company', perCompany) };

  /**
   * Leased points. A replica reserves a batch of a key's points in one atomic Redis call and
   * spends them here, synchronously: the hit path pays no round trip for most decisions. The
   * total can never pass `points`, since every reservation is counted in Redis; what a replica
   * reserved and did not spend is lost to the others for the rest of the window. A batch is at most
   * points / (replicas × 16), and a replica holds at most two (the rest of one, and the next,
   * reserved ahead), so what idle replicas strand stays under an eighth of the allowance.
   *
   * Within that bound a batch follows the key's demand (issue 11): it starts at 100 points and
   * doubles while each batch lasts less than `LEASE_TARGET_MS`, halving again when one lasts four
   * times as long. A fixed 100 was spent by one event-loop turn of 32 concurrent hits at 20 000
   * requests a second before its refill came back, and 40 % of hits then waited for Redis.
   */
  interface Lease {
    left: number;
    /** A background reservation starts when fewer points than this are left. */
    readonly refillBelow: number;
    readonly resetAt: number;
    /** The key's count in Redis after this reservation (ours included). */
    readonly reservedTotal: number;
    /** The size of the batch this lease was reserved with, and when it arrived. */
    readonly batch: number;
    readonly reservedAt: number;
  }
  const leases = { credential: new Map<string, Lease>(), company: new Map<string, Lease>() };
  const reserving = { credential: new Map<string, Promise<boolean>>(), company: new Map<string, Promise<boolean>>() };
  /** The largest batch: a sixteenth of the replica's share of the allowance. */
  const largestBatch = (policy: RatePolicy): number => Math.max(1, Math.floor(policy.points / (replicasNow() * 16)));
  /** The first batch of a key. */
  const firstBatch = (policy: RatePolicy): number => Math.min(FIRST_BATCH, largestBatch(policy));
  /** The next batch of a key, from how long its last one lasted. */
  const nextBatch = (policy: RatePolicy, previous: Lease | undefined, at: number): number => {
    const first = firstBatch(policy);
    if (previous === undefined) return first;
    const lasted = at - previous.reservedAt;
    const size =
      lasted < LEASE_TARGET_MS
        ? previous.batch * 2
        : lasted > 4 * LEASE_TARGET_MS
          ? Math.floor(previous.batch / 2)
          : previous.batch;
    return Math.max(first, Math.min(size, largestBatch(policy)));
  };
  const MAX_LEASES = 100_000;
  /** Whether a policy's leases are refilled ahead: only when its batches exceed one point. */
  const refillsAhead = { credential: firstBatch(perCredential) > 1, company: firstBatch(perCompany) > 1 };

  /** One point from the key's lease: a count, or `undefined` when a reservation is needed. */
  function takeLeased(name: PolicyName, key: string): PolicyCount | undefined {
    const lease = leases[name].get(key);
    const at = now();
    if (lease === undefined || lease.resetAt <= at) return undefined;
    const { points } = policies[name];
    if (lease.left > 0) {
      lease.left -= 1;
      // Refilled ahead, in the background, so that a busy key's decisions never wait for Redis.
      // Not for a batch of one (an allowance under 16 points per replica): a point reserved
      // ahead and never spent here would be one refused elsewhere, a large share of so small an
      // allowance; and so small an allowance is never busy enough for the round trip to matter.
      if (
        refillsAhead[name] &&
        lease.left <= lease.refillBelow &&
        lease.reservedTotal < points &&
        !reserving[name].has(key)
      )
        void reserve(name, key);
      return { name, points, consumed: lease.reservedTotal - lease.left, msBeforeNext: lease.resetAt - at };
    }
    // Nothing left here: refused until the window resets if the key is spent everywhere.
    return lease.reservedTotal >= points
      ? { name, points, consumed: points + 1, msBeforeNext: lease.resetAt - at }
      : undefined;
  }

  /** Requests of this replica waiting for a key's next reservation: it reserves for all of them. */
  const waiting = { credential: new Map<string, number>(), company: new Map<string, number>() };

  /** Reserves a batch, or the waiting demand if larger (one reservation per key at a time). */
  function reserve(name: PolicyName, key: string): Promise<boolean> {
    const running = reserving[name].get(key);
    if (running !== undefined) return running;
    const policy = policies[name];
    const batch = nextBatch(policy, leases[name].get(key), now());
    const size = Math.min(policy.points, Math.max(batch, waiting[name].get(key) ?? 1));
    const started = limiters[name]
      .consume(key, size)
      .then(
        (res) => res,
        (outcome: unknown) => {
          if (outcome instanceof RateLimiterRes) return outcome; // over the limit: still a count
          health.failed();
          return undefined;
        },
      )
      .then((res) => {
        if (res === undefined) return false;
        const before = res.consumedPoints - size;
        const previous = leases[name].get(key);
        const carried = previous !== undefined && previous.resetAt > now() ? previous.left : 0;
        if (leases[name].size >= MAX_LEASES) leases[name].clear(); // forgetting costs only a reservation
        const at = now();
        leases[name].set(key, {
          left: carried + Math.max(0, Math.min(size, policy.points - before)),
          refillBelow: Math.floor(batch / 4),
          resetAt: at + res.msBeforeNext,
          // What counts is what can be spent: a reservation that crossed the limit is capped at it.
          reservedTotal: Math.min(res.consumedPoints, policy.points),
          batch,
          reservedAt: at,
        });
        return true;
      })
      .finally(() => reserving[name].delete(key));
    reserving[name].set(key, started);
    return started;
  }

  /** A count after reserving: `undefined` when Redis failed. */
  async function countReserved(name: PolicyName, key: string): Promise<PolicyCount | undefined> {
    waiting[name].set(key, (waiting[name].get(key) ?? 0) + 1);
    try {
      // Bounded: each round either leases points or learns that the key is spent everywhere.
      for (let round = 0; round < 8; round++) {
        if (!(await reserve(name, key))) return undefined;
        const counted = takeLeased(name, key);
        if (counted !== undefined) return counted;
      }
      return undefined;
    } finally {
      const left = (waiting[name].get(key) ?? 1) - 1;
      if (left <= 0) waiting[name].delete(key);
      else waiting[name].set(key, left);
    }
  }

  /** A count for the key: from its lease, or after reserving; `undefined` if Redis failed. */
  function count(name: PolicyName, key: string): PolicyCount | Promise<PolicyCount | undefined> {
    return takeLeased(name, key) ?? countReserved(name, key);
  }

  /** Bounds a decision that waits for Redis by one command timeout, then decides on the share. */
  function bounded(principal: Principal, counted: Promise<PolicyCount[] | undefined>): Promise<LimitVerdict> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        health.failed();
        resolve(undefined);
      }, redis?.timeoutMs ?? 100);
    });
    return Promise.race([counted, late]).then((counts) => {
      clearTimeout(timer);
      const [first, ...rest] = counts ?? [];
      return first === undefined ? decideLocally(principal) : verdictOf([first, ...rest], policyHeader);
    });
  }

  return {
    decide(principal) {
      if (!health.usable()) return decideLocally(principal);
      const keys = keysOf(principal);
      // The credential first: a request it refuses does not spend its company's allowance.
      const credential = count('credential', keys.credential);
      if (!(credential instanceof Promise)) {
        if (credential.consumed > credential.points) return verdictOf([credential], policyHeader);
        const company = count('company', keys.company);
        if (!(company instanceof Promise)) return verdictOf([credential, company], policyHeader); // no Redis at all
        return bounded(
          principal,
          company.then((c) => (c === undefined ? undefined : [credential, c])),
        );
      }
      return bounded(
        principal,
        credential.then(async (c): Promise<PolicyCount[] | undefined> => {
          if (c === undefined) return undefined;
          if (c.consumed > c.points) return [c];
          const company = await count('company', keys.company);
          return company === undefined ? undefined : [c, company];
        }),
      );
    },
  };
}
