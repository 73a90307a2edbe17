/**
 * Per-resource cache policy (DESIGN §6): the config's defaults, each resource's overrides, and —
 * through `setOverrides` — the run-time overrides of the operator API. Every read of a policy goes
 * through `policyFor`, so a run-time change applies to the next request.
 */
import { RESOURCE_NAMES, type ResourceName } from '../catalog/resources.js';
import type { CachePolicy, FileConfig, Partition } from '../config/schema.js';

export interface EffectivePolicy extends CachePolicy {
  readonly partition: Partition;
}

export type PolicyOverrides = Partial<Record<ResourceName, Partial<CachePolicy>>>;

export class CachePolicies {
  #config: FileConfig['cache'];
  #overrides: PolicyOverrides = {};
  #effective = new Map<ResourceName, EffectivePolicy>();

  constructor(config: FileConfig['cache']) {
    this.#config = config;
    this.#rebuild();
  }

  policyFor(resource: ResourceName): EffectivePolicy {
    const policy = this.#effective.get(resource);
    if (policy === undefined) throw new Error(`no cache policy for ${resource}`);
    return policy;
  }

  /** Replaces the run-time overrides (the operations issue feeds them from Redis). */
  setOverrides(overrides: PolicyOverrides): void {
    this.#overrides = overrides;
    this.#rebuild();
  }

  /** A reloaded config file keeps the run-time overrides. */
  setConfig(config: FileConfig['cache']): void {
    this.#config = config;
    this.#rebuild();
  }

  overrides(): PolicyOverrides {
    return this.#overrides;
  }

  #rebuild(): void {
    const next = new Map<ResourceName, EffectivePolicy>();
    for (const name of RESOURCE_NAMES) {
      const { partition = this.#config.partition, ...fromFile } = this.#config.resources[name] ?? {};
      next.set(name, Object.freeze({ ...this.#config.defaults, ...fromFile, ...this.#overrides[name], partition }));
    }
    this.#effective = next;
  }
}
