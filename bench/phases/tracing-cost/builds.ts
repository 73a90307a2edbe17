import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The modules a hit goes through, from a build's root: this one's, or another commit's `dist/`
 * (TRACING_COST_BASELINE), so that both data planes run side by side in one process, each with its
 * own modules.
 */
export async function loadBuild(root: string) {
  /** The module at the first of its paths the build has: this layout's, then the one before it. */
  const at = (...paths: string[]): string => {
    const urls = paths.map((path) => new URL(path, root));
    const found = urls.find((url) => existsSync(fileURLToPath(url))) ?? urls[0];
    if (found === undefined) throw new TypeError('a module needs a path');
    return found.href;
  };
  return {
    accessLists: (await import(at('auth/access-lists.js'))) as typeof import('../../../src/auth/access-lists.js'),
    authenticate: (await import(at('auth/authenticate.js'))) as typeof import('../../../src/auth/authenticate.js'),
    authorize: (await import(at('auth/authorize.js'))) as typeof import('../../../src/auth/authorize.js'),
    claims: (await import(at('auth/claims.js'))) as typeof import('../../../src/auth/claims.js'),
    verifyToken: (await import(at('auth/verify-token.js'))) as typeof import('../../../src/auth/verify-token.js'),
    cacheKey: (await import(
      at('cache/entry/cache-key.js', 'cache/cache-key.js')
    )) as typeof import('../../../src/cache/entry/cache-key.js'),
    coordinator: (await import(
      at('cache/read/coordinator.js', 'cache/coordinator.js')
    )) as typeof import('../../../src/cache/read/coordinator.js'),
    entry: (await import(
      at('cache/entry/entry.js', 'cache/entry.js')
    )) as typeof import('../../../src/cache/entry/entry.js'),
    memoryStore: (await import(
      at('cache/stores/memory-store.js', 'cache/memory-store.js')
    )) as typeof import('../../../src/cache/stores/memory-store.js'),
    policy: (await import(
      at('cache/read/policy.js', 'cache/policy.js')
    )) as typeof import('../../../src/cache/read/policy.js'),
    readService: (await import(
      at('cache/read/read-service.js', 'cache/read-service.js')
    )) as typeof import('../../../src/cache/read/read-service.js'),
    resources: (await import(at('catalog/resources.js'))) as typeof import('../../../src/catalog/resources.js'),
    schema: (await import(at('config/schema.js'))) as typeof import('../../../src/config/schema.js'),
    errors: (await import(at('errors/proxy-error.js'))) as typeof import('../../../src/errors/proxy-error.js'),
    inbound: (await import(at('limits/inbound.js'))) as typeof import('../../../src/limits/inbound.js'),
    logger: (await import(at('observability/logger.js'))) as typeof import('../../../src/observability/logger.js'),
    dataPlane: (await import(
      at('planes/data/data-plane.js')
    )) as typeof import('../../../src/planes/data/data-plane.js'),
    canonical: (await import(
      at('request/canonical-read.js')
    )) as typeof import('../../../src/request/canonical-read.js'),
    query: (await import(at('request/query.js'))) as typeof import('../../../src/request/query.js'),
    route: (await import(at('request/route.js'))) as typeof import('../../../src/request/route.js'),
    target: (await import(at('request/target.js'))) as typeof import('../../../src/request/target.js'),
  };
}
export type Build = Awaited<ReturnType<typeof loadBuild>>;

/** This build's modules (the same instances as this bench's static imports of src/). */
export const THIS_BUILD = new URL('../../../src/', import.meta.url).href;
