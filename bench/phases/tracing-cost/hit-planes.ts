/**
 * A build's data plane serving hits: the real components as src/app.ts wires them for the
 * in-process store (the authenticator, never-refusing limits, the read service, the request log),
 * with ten pages of company 1's movements stored as a fill would store them; and a request log
 * that counts the answers and those that were not hits.
 */
import { pino } from 'pino';
import { DEV_SECRET } from '../../../src/cli/dev-credentials.js';
import type { RequestLog } from '../../../src/observability/logger.js';
import type { Tracing } from '../../../src/observability/tracing.js';
import type { DataPlane } from '../../../src/planes/data/data-plane.js';
import { generateDataset } from '../../../src/sandbox/dataset.js';
import type { Build } from './builds.js';

/** The request log as shipped (to /dev/null), counting every answer and every answer that was not a hit. */
export function hitCountingLog(build: Build): { log: RequestLog; answered: () => number; notHits: () => number } {
  const requestLog = build.logger.createRequestLog(
    build.logger.createLogger('info', pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 })),
  );
  let answered = 0;
  let notHits = 0;
  const log: RequestLog = (fields) => {
    requestLog(fields);
    answered += 1;
    if (fields.status !== 200 || fields.cache !== 'hit') notHits += 1;
  };
  return { log, answered: () => answered, notHits: () => notHits };
}

export type HitPlanes = Awaited<ReturnType<typeof hitPlanes>>;

/** Hits from one build's data plane: its own components, ten pages stored in its in-process store. */
export async function hitPlanes(build: Build, bearer: string, log: RequestLog) {
  const { errors } = build;
  // ── the real components, as src/app.ts wires them for the in-process store ──
  const verifier = build.verifyToken.createTokenVerifier({
    keys: { kind: 'secret', secret: DEV_SECRET },
    clockToleranceSeconds: 30,
    claims: build.claims.DEFAULT_CLAIM_NAMES,
  });
  const lists = build.accessLists.NO_ACCESS_LISTS;
  const authenticator = build.authenticate.createAuthenticator(verifier, lists);
  const config = build.schema.BUILT_IN_CONFIG.cache;
  // Pages stay fresh for the whole run (the built-in 10 s of `movements` would turn hits stale).
  const policies = new build.policy.CachePolicies({
    ...config,
    resources: { ...config.resources, movements: { ttl: 3_600 } },
  });
  const store = build.memoryStore.createMemoryStore({ maxBytes: config.memory.maxBytes });
  const reads = build.readService.createReadService({
    store,
    l1: undefined,
    coordinator: build.coordinator.LOCAL_COORDINATOR,
    policies,
    keyPrefix: 'slab',
    fetch: () => Promise.reject(new Error('tracing-cost: a hit must not reach the upstream')),
    coalesceWaitMs: 1_000,
  });
  const never = { points: 1_000_000_000, duration: 60 };
  const limiter = build.inbound.createInboundLimiter({ perCredential: never, perCompany: never, replicas: 1 });

  // ── ten pages of company 1's movements, stored as a fill would store them ──
  const identity = await authenticator.authenticate([`Bearer ${bearer}`]);
  if (identity instanceof errors.ProxyError) throw new Error(`tracing-cost: token refused: ${identity.code}`);
  const records = (generateDataset().get('movements') ?? []).filter((r) => String(r.company_id) === '1');
  const paths: string[] = [];
  const now = Date.now();
  for (let page = 0; page < 10; page++) {
    const data = records.slice(page * 30, page * 30 + 30);
    const after = page === 0 ? undefined : records[page * 30 - 1]?.id;
    const path = `${build.resources.API_PREFIX}/movements?${after === undefined ? '' : `after_id=${after}&`}per_page=30`;
    const body = Buffer.from(JSON.stringify({ data, meta: { per_page: 30, has_more: true, next_after_id: 0 } }));
    const target = build.target.classifyTarget(path);
    if (target.kind !== 'api') throw new Error(`tracing-cost: ${path} is not an API path`);
    const route = build.route.resolveRoute(target.path);
    if (route.kind !== 'list') throw new Error(`tracing-cost: ${path} names no list`);
    const read = build.canonical.buildCanonicalRead(route, build.query.parseRawQuery(target.rawQuery));
    if (read instanceof errors.ProxyError) throw new Error(`tracing-cost: ${path}: ${read.message}`);
    const address = build.cacheKey.cacheAddress('slab', read, identity.principal, 'company');
    const generation = await store.ensureGeneration(address);
    await store.save(address, {
      status: 200,
      contentType: 'application/json',
      etag: build.entry.strongEtag(body),
      body,
      storedAt: now,
      freshUntil: now + 3_600_000,
      keepUntil: now + 3_700_000,
      generation: generation ?? '',
    });
    paths.push(path);
  }
  return {
    paths,
    planeWith: (tracing: Tracing | undefined): DataPlane =>
      build.dataPlane.createDataPlane({
        authenticator,
        limiter,
        lists,
        policy: build.authorize.DEFAULT_AUTHORIZATION_POLICY,
        reads,
        log,
        yieldUnknownResources: false,
        ...(tracing !== undefined && { tracing }),
      }),
    close: () => verifier.close(),
  };
}
