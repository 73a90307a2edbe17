/**
 * The hit breakdown's rows beside the steps: the "of which" details and the alternative under the
 * step they belong to (found by the step's function, not by its name), and what a hit does not
 * pay each time (an L1 miss, a token's first verification, what a fill does once), each timed on
 * the replica's own parts.
 */
import type { Principal } from '../../src/auth/principal.js';
import { tokenDigest } from '../../src/auth/verify-token.js';
import { cacheAddress } from '../../src/cache/entry/cache-key.js';
import { brotliBody, decodeEntry, encodeEntry } from '../../src/cache/entry/entry.js';
import { createLogger, createRequestLog, type RequestLogFields } from '../../src/observability/logger.js';
import type { Exchange } from '../../src/planes/data/exchange.js';
import {
  applyInboundLimits,
  authenticate,
  type DataPlaneParts,
  readThroughCache,
  respondWithRead,
  type Step,
} from '../../src/planes/data/steps.js';
import type { CanonicalRead } from '../../src/request/canonical-read.js';
import { cycle, indexed, type Timing, type Workload } from './measure.js';
import type { Rig } from './rig.js';
import type { Flow, Traffic } from './traffic.js';

/** How a step is taken alone: with other parts, in batches of another size, on tokens never seen. */
export interface AloneOptions {
  readonly parts?: DataPlaneParts;
  readonly batch?: number;
  readonly newTokens?: boolean;
}

/** What the rows are timed with: the rig, its traffic, a hit's path and the pages' addresses. */
export interface Bench {
  readonly rig: Rig;
  readonly traffic: Traffic;
  /** A hit's path: the steps up to the one that answers it. */
  readonly path: Flow;
  readonly addresses: ReadonlyArray<ReturnType<typeof cacheAddress>>;
  readonly atRead: ReadonlyArray<{ readonly read: CanonicalRead; readonly principal: Principal }>;
  time<T>(work: Workload<T>): Promise<Timing>;
  /** Step k of the path alone, on exchanges taken through the steps before it. */
  stepAlone(k: number, options?: AloneOptions): Workload<Exchange>;
  /** The step's place on a hit's path, if it is on it. */
  onPath(step: Step): number | undefined;
}

/** A row's timing, beside the step it belongs to (found by the step's function, whatever its name). */
export interface Detail {
  readonly of: Step;
  readonly label: string;
  /** `k`: the step's place on a hit's path. */
  timing(k: number): Promise<Timing>;
}

export function detailsOf({ rig, traffic, time, stepAlone, atRead, addresses }: Bench): readonly Detail[] {
  const lastAnswer = (): RequestLogFields => {
    if (rig.answers.last === undefined) throw new Error('hit-breakdown: no request logged');
    return rig.answers.last;
  };
  return [
    {
      of: authenticate,
      label: 'of which tokenDigest (SHA-256 of the token: the cache key)',
      timing: () => time(indexed((i) => tokenDigest(cycle(traffic.tokens, i)))),
    },
    {
      of: applyInboundLimits,
      label: 'instead: the in-process limiter (one replica, no Redis)',
      timing: (k) => time(stepAlone(k, { parts: { ...rig.parts, limiter: rig.localLimiter } })),
    },
    {
      of: readThroughCache,
      label: 'of which policyFor + cacheAddress (the key and its group tag)',
      timing: () =>
        time(
          indexed((i) => {
            const { read, principal } = cycle(atRead, i);
            const policy = rig.policies.policyFor(read.resource.name);
            return cacheAddress(rig.keyPrefix, read, principal, policy.partition).tag;
          }),
        ),
    },
    {
      of: readThroughCache,
      label: 'of which L1Cache.get',
      timing: () =>
        time(
          indexed((i) => {
            const address = cycle(addresses, i);
            return rig.l1.get(address.key, address.tag);
          }),
        ),
    },
    {
      of: respondWithRead,
      label: 'of which the request log line (a template, gathered per turn, as shipped)',
      timing: () => {
        const fields = lastAnswer();
        return time(indexed(() => rig.requestLog(fields)));
      },
    },
    {
      of: respondWithRead,
      label: 'of which destination.write of one ready line (sonic-boom; shipped: once per turn)',
      timing: () => {
        // The line the shipped log writes for the latest answer, caught on its way out.
        let line = '';
        const catchLine = (text: string): void => {
          line = text;
        };
        const logger = createLogger('info', { write: catchLine });
        createRequestLog(logger)(lastAnswer());
        logger.flush(); // gathered until the turn ends: written now
        return time(indexed(() => rig.destination.write(line)));
      },
    },
  ];
}

export const CONTEXT = 'not per hit';

/**
 * The read step on an L1 miss: each read's group forgotten first, as a purge leaves it (a map
 * delete, inside the timing), so that the replica's read service reads the page from the store
 * and decodes it.
 */
function l1Misses({ rig, stepAlone }: Bench, k: number): Workload<{ readonly ex: Exchange; readonly tag: string }> {
  const alone = stepAlone(k, { batch: 32 });
  const tagOf = (ex: Exchange): string => {
    if (ex.read === undefined || ex.identity === undefined) throw new Error('hit-breakdown: no read before the cache');
    const policy = rig.policies.policyFor(ex.read.resource.name);
    return cacheAddress(rig.keyPrefix, ex.read, ex.identity.principal, policy.partition).tag;
  };
  return {
    prepare: async (size) => (await alone.prepare(size)).map((ex) => ({ ex, tag: tagOf(ex) })),
    run({ ex, tag }) {
      rig.l1.forgetGroup(tag);
      return alone.run(ex);
    },
    batch: 32,
  };
}

/** The rows of what a hit does not pay each time; the CPU of an L1 miss, when the read step is on the path. */
export async function notPerHit(
  bench: Bench,
  sample: Parameters<typeof encodeEntry>[0],
  addRow: (label: string, t: Pick<Timing, 'meanUs' | 'medianUs'>) => void,
): Promise<{ readonly storeMissCpuUs: number | undefined }> {
  const { time, stepAlone, onPath } = bench;
  let storeMissCpuUs: number | undefined;
  const readK = onPath(readThroughCache);
  if (readK !== undefined) {
    const miss = await time(l1Misses(bench, readK));
    storeMissCpuUs = miss.cpuUs;
    addRow('read step on an L1 miss: the store (Redis MGET + decodeEntry), wall', miss);
    addRow('the same, CPU of this process', { meanUs: miss.cpuUs, medianUs: miss.cpuUs });
  }
  const authK = onPath(authenticate);
  if (authK !== undefined) {
    const firstSight = await time(stepAlone(authK, { batch: 32, newTokens: true }));
    addRow('authenticate step, a token not seen lately (jose HS256 verify)', firstSight);
  }
  const stored = encodeEntry(sample);
  addRow('decodeEntry alone (brotli, one page)', await time(indexed(() => decodeEntry(stored), 32)));
  addRow(
    'brotliBody (brotli q4 of one page; once per fill)',
    await time(indexed(() => brotliBody(sample.body, sample.etag), 16)),
  );
  addRow(
    'encodeEntry of a filled entry (compressed already; once per fill)',
    await time(indexed(() => encodeEntry(sample), 32)),
  );
  return { storeMissCpuUs };
}
