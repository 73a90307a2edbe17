/**
 * Who reads, and what: every sandbox company's readers, four credentials each, asking for the
 * thirteen resources with a few page sizes and cursors (popular pages more often than others, as
 * real readers do: Zipf over the list), through the balancer, with autocannon; and, when asked
 * for, keyset walkers beside them, a walker a company, walking movements to the end
 * (bench/lib/load/walkers.ts).
 */
import autocannon from 'autocannon';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { runWalkers, type WalkFigures } from '../lib/load/walkers.js';
import { zipfPicker } from '../lib/zipf.js';
import type { LoadOptions } from './types.js';

/** What the walkers walk: the sandbox's one large collection is company 1's; the others are a few pages each. */
const WALKED_RESOURCE = 'movements';
const WALK_PAGE_SIZE = 10;

const PAGE_SIZES = [5, 10, 20, 50];
const CURSORS = [undefined, 10, 40];
const CREDENTIALS_PER_COMPANY = 4;

/** Every read the readers make; earlier entries are the popular ones. */
export function readTargets(): string[] {
  const targets: string[] = [];
  for (const perPage of PAGE_SIZES) {
    for (const cursor of CURSORS) {
      for (const resource of RESOURCE_NAMES) {
        targets.push(
          `${API_PREFIX}/${resource}?per_page=${String(perPage)}${cursor === undefined ? '' : `&after_id=${String(cursor)}`}`,
        );
      }
    }
  }
  return targets;
}

/** The readers' tokens, company by company, CREDENTIALS_PER_COMPANY each. */
export async function readerTokens(secret: string): Promise<string[]> {
  const tokens: string[] = [];
  for (const company of SANDBOX_COMPANIES) {
    for (let n = 0; n < CREDENTIALS_PER_COMPANY; n++)
      tokens.push(await mintDevToken({ company, subject: `load-${String(company)}-${String(n)}`, secret }));
  }
  return tokens;
}

/** The walkers of the run, walking until it ends; nothing when it has none. */
export function walkBeside(options: LoadOptions, tokens: readonly string[]): Promise<WalkFigures | undefined> {
  const walkers = options.walkers ?? 0;
  if (walkers === 0) return Promise.resolve(undefined);
  return runWalkers({
    targetUrl: options.targetUrl,
    // A walker a company, the large collection's company last (its walk is the longest).
    tokens: [...tokens.slice(CREDENTIALS_PER_COMPANY), ...tokens.slice(0, CREDENTIALS_PER_COMPANY)].filter(
      (_, i) => i % CREDENTIALS_PER_COMPANY === 0,
    ),
    walkers,
    thinkMs: options.walkerThinkMs ?? 100,
    resource: WALKED_RESOURCE,
    perPage: WALK_PAGE_SIZE,
    untilMs: performance.now() + options.seconds * 1000,
  });
}

/** What becomes of each request: its answer's time and status, or a connection error. */
export interface ReadListener {
  answered(responseTime: number, statusCode: number): void;
  failed(): void;
}

/** The readers for the run's seconds, each request a popular target and a token drawn at random. */
export function readThroughBalancer(
  options: LoadOptions,
  targets: readonly string[],
  tokens: readonly string[],
  listener: ReadListener,
): Promise<autocannon.Result> {
  const pick = zipfPicker(targets.length);
  return new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.targetUrl,
        connections: options.connections,
        duration: options.seconds,
        requests: [
          {
            method: 'GET',
            setupRequest: (request) => ({
              ...request,
              path: targets[pick()] ?? targets[0] ?? '/',
              headers: {
                ...request.headers,
                authorization: `Bearer ${tokens[Math.floor(Math.random() * tokens.length)] ?? ''}`,
              },
            }),
          },
        ],
      },
      (error: unknown, done: autocannon.Result) =>
        error === null || error === undefined
          ? resolve(done)
          : reject(error instanceof Error ? error : new Error(String(error))),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      listener.answered(responseTime, statusCode);
    });
    instance.on('reqError', () => {
      listener.failed();
    });
  });
}
