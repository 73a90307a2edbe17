/**
 * Keyset walkers beside the load test's readers (docs/load-test.md): clients that walk a
 * collection to its end (`after_id` = the previous page's `meta.next_after_id`), spending a while
 * on each page as a sync job does, then start over, until the run ends. Their walk times, and what
 * the proxy fetched ahead of them (docs/cache.md#prefetch), are the profile's figures.
 */
import { API_PREFIX } from '../../../src/catalog/resources.js';
import { median } from '../stats.js';

export interface WalkersOptions {
  readonly targetUrl: string;
  /** Bearer tokens, one walker each (round robin when fewer). */
  readonly tokens: readonly string[];
  readonly walkers: number;
  readonly thinkMs: number;
  /** The collection walked, and its page size. */
  readonly resource: string;
  readonly perPage: number;
  /** When walking stops (performance.now()): a walk under way then is not counted. */
  readonly untilMs: number;
}

export interface WalkFigures {
  readonly walkers: number;
  /** Walks completed, and the pages they read. */
  readonly walks: number;
  readonly pages: number;
  readonly medianSeconds: number;
  readonly maxSeconds: number;
  /** Answers other than 200 (a walk that meets one ends there, uncounted). */
  readonly failures: number;
}

interface Page {
  readonly meta?: { readonly has_more?: boolean; readonly next_after_id?: number };
}

/** One walk to the end: its pages, or `undefined` when it ended early (the deadline, or an error). */
async function walkOnce(options: WalkersOptions, token: string, onFailure: () => void): Promise<number | undefined> {
  let after: number | undefined;
  for (let pages = 1; performance.now() < options.untilMs; pages++) {
    const query = `per_page=${String(options.perPage)}${after === undefined ? '' : `&after_id=${String(after)}`}`;
    const res = await fetch(`${options.targetUrl}${API_PREFIX}/${options.resource}?${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      onFailure();
      return undefined;
    }
    const page = (await res.json()) as Page;
    if (page.meta?.has_more !== true || page.meta.next_after_id === undefined) return pages;
    after = page.meta.next_after_id;
    if (options.thinkMs > 0) await new Promise((resolve) => setTimeout(resolve, options.thinkMs));
  }
  return undefined;
}

export async function runWalkers(options: WalkersOptions): Promise<WalkFigures> {
  const seconds: number[] = [];
  let pages = 0;
  let failures = 0;
  const walker = async (index: number): Promise<void> => {
    const token = options.tokens[index % options.tokens.length] ?? '';
    while (performance.now() < options.untilMs) {
      const started = performance.now();
      const walked = await walkOnce(options, token, () => {
        failures += 1;
      });
      if (walked === undefined) {
        // An error, not the deadline: a moment before starting over, never a tight loop.
        if (performance.now() < options.untilMs) await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      seconds.push((performance.now() - started) / 1000);
      pages += walked;
    }
  };
  await Promise.all(Array.from({ length: options.walkers }, (_, i) => walker(i)));
  return {
    walkers: options.walkers,
    walks: seconds.length,
    pages,
    medianSeconds: seconds.length === 0 ? Number.NaN : median(seconds),
    maxSeconds: seconds.length === 0 ? Number.NaN : Math.max(...seconds),
    failures,
  };
}
