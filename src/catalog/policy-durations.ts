/**
 * A cache policy's four durations (docs/cache.md): the one definition that the config file's
 * defaults and per-resource settings, the operator API's run-time overrides and the cache's
 * effective policies are all made of, so that the three cannot drift apart.
 */
import { z } from 'zod';

export const POLICY_DURATIONS = ['ttl', 'staleWhileRevalidate', 'staleIfError', 'notFoundTtl'] as const;
export type PolicyDuration = (typeof POLICY_DURATIONS)[number];

/** Whole seconds; a year is the longest any of them makes sense. */
export const durationSeconds = z.number().int().min(0).max(31_536_000);

/** All four: the config file's `cache.defaults`, and every resource's effective policy. */
export const policyDurationsSchema = z.strictObject({
  ttl: durationSeconds,
  staleWhileRevalidate: durationSeconds,
  staleIfError: durationSeconds,
  notFoundTtl: durationSeconds,
});
export type PolicyDurations = z.infer<typeof policyDurationsSchema>;

/** Some of the four: a resource's settings in the config file, or a run-time override. */
export const somePolicyDurationsSchema = policyDurationsSchema.partial();
export type SomePolicyDurations = { readonly [K in PolicyDuration]?: number | undefined };

/**
 * Automatic lifetimes (docs/cache.md#automatic-lifetimes): each page's own, within `min` and `max`
 * seconds; the policy's `ttl` is then a page's first lifetime when the upstream sends no
 * `Last-Modified`.
 */
export const autoTtlSchema = z
  .strictObject({ min: durationSeconds.min(1), max: durationSeconds.min(1) })
  .refine((bounds) => bounds.min <= bounds.max, { message: 'min must not exceed max', path: ['max'] });
export type AutoTtlSetting = z.infer<typeof autoTtlSchema>;

/**
 * A run-time override of a resource's policy: some of its durations, its prefetch switch
 * (docs/cache.md#prefetch), and its automatic lifetimes (`null`: back to the fixed `ttl`).
 */
export const policyOverrideSchema = somePolicyDurationsSchema.extend({
  prefetch: z.boolean().optional(),
  autoTtl: z.union([autoTtlSchema, z.null()]).optional(),
});
export type PolicyOverride = SomePolicyDurations & {
  readonly prefetch?: boolean | undefined;
  readonly autoTtl?: AutoTtlSetting | null | undefined;
};
