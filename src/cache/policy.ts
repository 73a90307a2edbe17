/**
 * Per-resource cache policy (README, "The cache"): the config's defaults, each resource's overrides,
 * and the run-time overrides of the operator API, read from their owner (the operator state) and
 * never kept here. Every read of a policy goes through `policyFor`, so a run-time change applies
 * to the next request: the owner calls `refresh` when the overrides change.
 */
import { RESOURCE_NAMES, type ResourceName } from '../catalog/resources.js';
import type { CachePolicy, FileConfig, Partition } from '../config/schema.js';

export interface EffectivePolicy extends CachePolicy {
  readonly partition: Partition;
}

export type PolicyOverrides = Partial<Record<ResourceName, Partial<CachePolicy>>>;

export class CachePolicies {
  #config: FileConfig['cache'];
  readonly #overrides: () => PolicyOverrides;
  #effective = new Map<ResourceName, EffectivePolicy>();

  constructor(config: FileConfig['cache'], overrides: () => PolicyOverrides = () => ({})) {
    this.#config = config;
    this.#overrides = overrides;
    this.#rebuild();
  }

  policyFor(resource: ResourceName): EffectivePolicy {
    const policy = this.#effective.get(resource);
    if (policy === undefined) throw new Error(`no cache policy for ${resource}`);
    return policy;
  }

  /** The run-time overrides changed: the effective policies are built again from them. */
  refresh(): void {
    this.#rebuild();
  }

  /** A reloaded config file keeps the run-time overrides. */
  setConfig(config: FileConfig['cache']): void {
    this.#config = config;
    this.#rebuild();
  }

  #rebuild(): void {
    const next = new Map<ResourceName, EffectivePolicy>();
    const overrides = this.#overrides();
    for (const name of RESOURCE_NAMES) {
      const { partition = this.#config.partition, ...fromFile } = this.#config.resources[name] ?? {};
      next.set(name, Object.freeze({ ...this.#config.defaults, ...fromFile, ...overrides[name], partition }));
    }
    this.#effective = next;
  }
}
