/**
 * Purges and invalidations of a company's groups (docs/operations.md#the-operator-api,
 * docs/cache.md#soft-invalidation): stored first (a new generation, or marks), then announced on
 * the purge bus, to which this replica's L1 listens as every other replica's does.
 */
import { RESOURCE_NAMES, type ResourceName } from '../../catalog/resources.js';
import type { Metrics } from '../../observability/metrics.js';
import { groupTag, markKeys } from '../entry/cache-key.js';
import { listsMark, newMark } from '../entry/marks.js';
import { encodeChangedIds } from '../entry/page-window.js';
import type { L1Cache } from '../stores/l1.js';
import type { CacheStore } from '../stores/store.js';
import { longestKeptMs } from './page-lifetime.js';
import type { CachePolicies } from './policy.js';
import { createLocalPurgeBus, type PurgeBus } from './purge-bus.js';

export interface GroupChangesOptions {
  readonly store: CacheStore;
  readonly l1: L1Cache | undefined;
  readonly policies: CachePolicies;
  readonly keyPrefix: string;
  readonly now: () => number;
  readonly metrics?: Pick<Metrics, 'invalidation'> | undefined;
  /** How purges reach the other replicas (default: this process only). */
  readonly purges?: PurgeBus | undefined;
}

export class GroupChanges {
  readonly #options: GroupChangesOptions;
  readonly #purges: PurgeBus;

  constructor(options: GroupChangesOptions) {
    this.#options = options;
    this.#purges = options.purges ?? createLocalPurgeBus();
    const { l1 } = options;
    // The cache subscribes to its own announcements: a replica's L1 never serves a group purged
    // anywhere, nor a copy set before an invalidation of its group.
    this.#purges.subscribe((announcement) => {
      if (l1 === undefined) return;
      for (const name of announcement.resource === undefined ? RESOURCE_NAMES : [announcement.resource]) {
        const tag = groupTag({ company: announcement.company, resource: name });
        if (announcement.kind === 'purge') l1.forgetGroup(tag);
        else l1.markGroup(tag, announcement.mark);
      }
    });
  }

  /** Every entry of the company (or of one of its resources) a miss on every replica. */
  async purge(company: string, resource?: ResourceName): Promise<boolean> {
    const groups = (resource === undefined ? RESOURCE_NAMES : [resource]).map((name) => ({ company, resource: name }));
    const generations = await Promise.all(groups.map((group) => this.#options.store.purge(group)));
    // Announced after the new generation is stored: a replica that drops its L1 copy then reads
    // the new generation, never the old one again.
    const announced = await this.#purges.announce({ kind: 'purge', company, resource });
    return announced && generations.every((g) => g !== undefined);
  }

  /** The company's pages that a change can show stale on every replica (docs/cache.md#soft-invalidation). */
  async invalidate(company: string, resource: ResourceName | undefined, records?: readonly string[]): Promise<boolean> {
    const { store, policies, keyPrefix } = this.#options;
    const names = resource === undefined ? RESOURCE_NAMES : [resource];
    const mark = newMark(this.#options.now());
    // The records' ids go with the lists' mark: a list page whose keyset window cannot hold any of
    // them stays fresh (docs/cache.md#window-marks).
    const onLists = listsMark(mark, records === undefined ? undefined : encodeChangedIds(records));
    const stored = await Promise.all(
      names.map((name) => {
        const group = { company, resource: name };
        // A record's mark outlives every entry filled before it (page-lifetime.ts).
        const keepMs = longestKeptMs(policies.policyFor(name));
        return store.invalidate({ keys: markKeys(keyPrefix, group), mark, listsMark: onLists, records, keepMs });
      }),
    );
    // Announced after the marks are stored: a replica that stops serving its L1 copies reads them.
    const announced = await this.#purges.announce({ kind: 'invalidate', company, resource, mark: onLists });
    this.#options.metrics?.invalidation(records === undefined ? 'resource' : 'records');
    return announced && stored.every(Boolean);
  }
}
