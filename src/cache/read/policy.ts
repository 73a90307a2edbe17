/**
 * Per-resource cache policy (docs/cache.md): the config's defaults, each resource's overrides,
 * and the run-time overrides of the operator API, which their owner (the operator state) pushes
 * here with their value whenever they change. Every read of a policy goes through `policyFor`, so
 * a run-time change applies to the next request.
 */
import {
  POLICY_DURATIONS,
  type PolicyDurations,
  type PolicyOverride,
  type SomePolicyDurations,
} from '../../catalog/policy-durations.js';

export type { PolicyOverride };

import { RESOURCE_NAMES, type ResourceName } from '../../catalog/resources.js';
import type { AutoTtl } from './auto-lifetime.js';

/** Who shares an entry (docs/cache.md): a company, an employee of it, or one credential. */
export const PARTITIONS = ['company', 'employee', 'credential'] as const;
export type Partition = (typeof PARTITIONS)[number];

/** A resource's cache policy, whole seconds (the config file's `cache.defaults`). */
export type CachePolicy = Readonly<PolicyDurations>;

/** One resource's settings in the config file: some or all of the policy, and who shares its entries. */
export interface ResourcePolicySettings extends SomePolicyDurations {
  readonly partition?: Partition | undefined;
  /** Next pages fetched ahead of keyset walkers (docs/cache.md#prefetch); off unless given. */
  readonly prefetch?: boolean | undefined;
  /** Each page's lifetime from its history, within these bounds (auto-lifetime.ts); off unless given. */
  readonly autoTtl?: AutoTtl | undefined;
}

/** The cache settings the policies are made of (the config file's `cache`, as far as they go). */
export interface CacheSettings {
  readonly partition: Partition;
  readonly defaults: CachePolicy;
  readonly resources: Partial<Record<ResourceName, ResourcePolicySettings | undefined>>;
}

export interface EffectivePolicy extends CachePolicy {
  readonly partition: Partition;
  readonly prefetch: boolean;
  /** Automatic lifetimes' bounds; `undefined`: every page lives `ttl`. */
  readonly autoTtl: AutoTtl | undefined;
}

export type PolicyOverrides = Partial<Record<ResourceName, PolicyOverride | undefined>>;

/** The durations that are given: a layer that leaves one out (or gives `undefined`) keeps the one below. */
function given(layer: PolicyOverride | undefined): Partial<CachePolicy> {
  const out: { -readonly [K in keyof CachePolicy]?: number } = {};
  for (const key of POLICY_DURATIONS) {
    const value = layer?.[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

export class CachePolicies {
  #config: CacheSettings;
  #overrides: PolicyOverrides;
  #effective = new Map<ResourceName, EffectivePolicy>();

  constructor(config: CacheSettings, overrides: PolicyOverrides = {}) {
    this.#config = config;
    this.#overrides = overrides;
    this.#rebuild();
  }

  policyFor(resource: ResourceName): EffectivePolicy {
    const policy = this.#effective.get(resource);
    if (policy === undefined) throw new Error(`no cache policy for ${resource}`);
    return policy;
  }

  /** The run-time overrides now in force: the effective policies are built again from them. */
  setOverrides(overrides: PolicyOverrides): void {
    this.#overrides = overrides;
    this.#rebuild();
  }

  /** A reloaded config file keeps the run-time overrides. */
  setConfig(config: CacheSettings): void {
    this.#config = config;
    this.#rebuild();
  }

  #rebuild(): void {
    const next = new Map<ResourceName, EffectivePolicy>();
    const overrides = this.#overrides;
    for (const name of RESOURCE_NAMES) {
      const fromFile = this.#config.resources[name];
      const partition = fromFile?.partition ?? this.#config.partition;
      const prefetch = overrides[name]?.prefetch ?? fromFile?.prefetch ?? false;
      // A run-time `null` turns the file's automatic lifetimes off; absent, the file's stand.
      const autoOverride = overrides[name]?.autoTtl;
      const autoTtl = autoOverride === null ? undefined : (autoOverride ?? fromFile?.autoTtl);
      const durations = { ...this.#config.defaults, ...given(fromFile), ...given(overrides[name]) };
      next.set(name, Object.freeze({ ...durations, partition, prefetch, autoTtl }));
    }
    this.#effective = next;
  }
}
