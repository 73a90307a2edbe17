import type { CacheStore } from '../../src/cache/stores/store.js';

/**
 * A store whose every operation is `inner`'s, as an object of its own properties: a test spreads it
 * and replaces the operations it watches or breaks (a class's methods do not spread).
 */
export function forwardingStore(inner: CacheStore): CacheStore {
  const { peek, reachable, footprint, bytesByCompany } = inner;
  return {
    kind: inner.kind,
    lookup: (address, known) => inner.lookup(address, known),
    ...(peek !== undefined && { peek: (address) => peek.call(inner, address) }),
    ...(reachable !== undefined && { reachable: (address) => reachable.call(inner, address) }),
    ensureGeneration: (address) => inner.ensureGeneration(address),
    save: (address, entry) => inner.save(address, entry),
    freshen: (address, stored, fresher) => inner.freshen(address, stored, fresher),
    takeAhead: (address) => inner.takeAhead(address),
    invalidate: (invalidation) => inner.invalidate(invalidation),
    purge: (group) => inner.purge(group),
    ...(footprint !== undefined && { footprint: () => footprint.call(inner) }),
    ...(bytesByCompany !== undefined && { bytesByCompany: () => bytesByCompany.call(inner) }),
    close: () => inner.close(),
  };
}
