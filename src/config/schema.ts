/**
 * The config file's schema and built-in defaults (docs/configuration.md#config-file). Strict: an unknown key or a bad value
 * stops the start with a message naming the key. `config/default.yaml` shows these same defaults;
 * a test holds the two equal.
 */
import { z } from 'zod';
import { DEFAULT_CLAIM_NAMES } from '../auth/claims.js';
import { KEY_PREFIX_PATTERN } from '../cache/entry/cache-key.js';
import { PARTITIONS } from '../cache/read/policy.js';
import { autoTtlSchema, policyDurationsSchema, somePolicyDurationsSchema } from '../catalog/policy-durations.js';
import { RESOURCE_NAMES } from '../catalog/resources.js';

const positiveSeconds = z.number().positive().max(3600);

const cachePolicy = policyDurationsSchema;

const resourceCachePolicy = somePolicyDurationsSchema.extend({
  partition: z.enum(PARTITIONS).optional(),
  /** Next pages of keyset walks fetched ahead of the walker (docs/cache.md#prefetch). */
  prefetch: z.boolean().optional(),
  /** Each page's lifetime from its own history, within these bounds (docs/cache.md#automatic-lifetimes). */
  autoTtl: autoTtlSchema.optional(),
});

const rateLimitPolicy = z.strictObject({
  points: z.number().int().min(1).max(10_000_000),
  duration: z.number().int().min(1).max(86_400),
});

const claimName = z.string().min(1).max(128);

export const configSchema = z.strictObject({
  cache: z.strictObject({
    /** First segment of every Redis key: several deployments can share one Redis. */
    keyPrefix: z.string().regex(KEY_PREFIX_PATTERN, 'letters, digits, _ . - (1-32)'),
    partition: z.enum(PARTITIONS),
    defaults: cachePolicy,
    resources: z.strictObject(
      Object.fromEntries(RESOURCE_NAMES.map((name) => [name, resourceCachePolicy.optional()])) as Record<
        (typeof RESOURCE_NAMES)[number],
        z.ZodOptional<typeof resourceCachePolicy>
      >,
    ),
    /** The in-process store of a single replica (no REDIS_URL). */
    memory: z.strictObject({ maxBytes: z.number().int().min(1024).max(68_719_476_736) }),
    /** The in-process LRU in front of Redis. */
    l1: z.strictObject({
      maxBytes: z.number().int().min(1024).max(17_179_869_184),
      ttl: z.number().positive().max(60),
    }),
    /** Background refreshes (src/cache/read/refresh-ahead.ts). */
    refresh: z.strictObject({
      /** The last fraction of a page's freshness in which a hit refreshes it; 0: only once stale. */
      ahead: z.number().min(0).max(0.5),
      /** Background refreshes running at once per replica. */
      maxConcurrent: z.number().int().min(1).max(10_000),
    }),
    /** The ceiling on refreshes that automatic lifetimes start early (docs/cache.md#automatic-lifetimes). */
    autoTtl: z.strictObject({
      /** Per replica, a second. */
      maxRefreshesPerSecond: z.number().min(0).max(100_000),
      /** For all replicas together, a second (each takes its share); 0: no fleet ceiling. */
      fleetMaxRefreshesPerSecond: z.number().min(0).max(1_000_000),
    }),
    /** Soft invalidations (docs/cache.md#soft-invalidation). */
    invalidation: z.strictObject({
      /**
       * Seconds after an invalidation during which a page's stored copy is still served (stale)
       * while its refresh runs; after them the next read waits for the refresh.
       */
      staleFor: z.number().min(0).max(3600),
      /**
       * The token bucket of `POST /admin/cache/invalidate`, per replica, counted in changes (each
       * member of a batch's `changes` is one): refilled at `changesPerSecond`, holding `burst` at
       * most. A request whose changes the bucket does not hold is a 429 with `Retry-After`; a batch
       * larger than `burst` is a 400 (docs/operations.md#the-change-feed).
       */
      changesPerSecond: z.number().positive().max(1_000_000),
      burst: z.number().int().min(1).max(10_000_000),
    }),
    /** Next-page prefetch, for the resources whose `prefetch` is on (docs/cache.md#prefetch). */
    prefetch: z.strictObject({
      /** Pages fetched ahead of a walker, at most. */
      depth: z.number().int().min(1).max(10),
      /** Prefetches in flight per replica, at most. */
      maxConcurrent: z.number().int().min(1).max(1_000),
      /** Prefetches in flight for one company per replica, at most. */
      maxPerCompany: z.number().int().min(1).max(100),
    }),
  }),
  redis: z.strictObject({
    /** docs/architecture.md#ioredis-defaults-that-hurt-a-cache: only a command timeout bounds a hung Redis; the cache wants it short. */
    commandTimeoutMs: z.number().int().min(1).max(100),
  }),
  rateLimit: z.strictObject({
    perCredential: rateLimitPolicy,
    perCompany: rateLimitPolicy,
    /** Replicas sharing the limits: with Redis unavailable each enforces points / replicas. */
    replicas: z.number().int().min(1).max(10_000),
  }),
  upstream: z.strictObject({
    timeout: positiveSeconds,
    maxConcurrent: z.number().int().min(1).max(10_000),
    maxPerSecond: z.number().int().min(1).max(1_000_000),
    /** Longest wait for an upstream slot; then a stale copy, or 503 with Retry-After. */
    maxQueueWait: z.number().positive().max(60),
    /**
     * A replica cut off from the upstream budget's shared ledger: `share` (the default) keeps to its
     * share at once (misses keep reaching the upstream, one share above the bound per replica cut
     * off: a reader never gets an error because Redis failed); `wait` starts nothing until every
     * slot the ledger granted must be over (the budget's bound holds), then keeps to its share.
     */
    budgetCutOff: z.enum(['wait', 'share']),
    /**
     * Slots per turn of each company named, in the line of misses waiting for the upstream budget
     * (docs/limits.md#fair-shares): a paying tier, an internal integration; every other company 1.
     */
    companyWeights: z.record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/), z.number().int().min(1).max(100)),
    maxBodyBytes: z.number().int().min(1024).max(1_073_741_824),
    passthrough: z.boolean(),
    /** Opens after `failures` upstream failures in a row, for `openFor` seconds, then one probe. */
    breaker: z.strictObject({
      failures: z.number().int().min(1).max(1_000),
      openFor: z.number().positive().max(3600),
    }),
  }),
  /** The operator state shared by every replica (docs/scaling-out.md#the-operator-state-and-what-survives-what). */
  control: z.strictObject({
    /** How often a replica checks its operator state against Redis, seconds. */
    syncInterval: z.number().positive().max(60),
    /**
     * Past this many seconds without confirming its operator state against Redis, a replica's
     * `/readyz` answers 503 `stale`; 0 keeps it serving with the last state it knows.
     */
    maxStaleness: z.number().min(0).max(86_400),
    /**
     * Before a replica has read the operator state since it started (Redis unreachable at the
     * start): `refuse` answers reads 503 `operator_state_unavailable` and `/readyz` 503
     * `unconfirmed`; `serve` serves as though nothing were revoked or blocked.
     */
    unconfirmed: z.enum(['refuse', 'serve']),
  }),
  auth: z.strictObject({
    requiredScope: z.string().min(1).max(256),
    requiredModule: z.string().min(1).max(256),
    clockTolerance: z.number().min(0).max(3600),
    claims: z.strictObject({
      company: claimName,
      permissions: claimName,
      employee: claimName,
      employeePermissions: claimName,
      scope: claimName,
      modules: claimName,
    }),
  }),
});

export type FileConfig = z.infer<typeof configSchema>;

/** The built-in defaults: what `config/default.yaml` shows. */
export const BUILT_IN_CONFIG: FileConfig = {
  cache: {
    keyPrefix: 'slab',
    partition: 'company',
    defaults: { ttl: 30, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 },
    resources: {
      warehouses: { ttl: 300 },
      movements: { ttl: 10 },
    },
    memory: { maxBytes: 268_435_456 },
    l1: { maxBytes: 67_108_864, ttl: 1 },
    refresh: { ahead: 0.1, maxConcurrent: 8 },
    autoTtl: { maxRefreshesPerSecond: 20, fleetMaxRefreshesPerSecond: 0 },
    invalidation: { staleFor: 1, changesPerSecond: 2000, burst: 10_000 },
    prefetch: { depth: 2, maxConcurrent: 4, maxPerCompany: 2 },
  },
  redis: { commandTimeoutMs: 100 },
  rateLimit: {
    perCredential: { points: 600, duration: 60 },
    perCompany: { points: 3000, duration: 60 },
    replicas: 1,
  },
  upstream: {
    timeout: 10,
    maxConcurrent: 64,
    maxPerSecond: 200,
    maxQueueWait: 2,
    budgetCutOff: 'share',
    companyWeights: {},
    maxBodyBytes: 8_388_608,
    passthrough: false,
    breaker: { failures: 5, openFor: 10 },
  },
  control: { syncInterval: 1, maxStaleness: 0, unconfirmed: 'refuse' },
  auth: {
    requiredScope: 'operations:read',
    requiredModule: 'slab',
    clockTolerance: 30,
    claims: { ...DEFAULT_CLAIM_NAMES },
  },
};
