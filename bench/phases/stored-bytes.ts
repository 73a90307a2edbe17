/**
 * Redis bytes per stored page: `MEMORY USAGE` of each warmed page's entry (key, value and
 * Redis's own overhead) against the page's raw JSON, and the value alone (`STRLEN`).
 */
import { Redis } from 'ioredis';
import { fmt, fmtInt, say, verdict } from '../lib/format.js';
import type { Page } from './context.js';

/** Stored bytes (MEMORY USAGE) at most this share of the raw JSON. */
export const TARGET_STORED_RATIO = 0.25;

export interface StoredBytesFigures {
  readonly measuredKeys: number;
  readonly pages: number;
  readonly storedRatio: number;
  readonly valueRatio: number;
  readonly rawBytes: number;
  readonly pass: boolean;
}

export async function runStoredBytes(
  redisUrl: string,
  keyPrefix: string,
  pages: readonly Page[],
): Promise<StoredBytesFigures> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let stored = 0;
    let strlen = 0;
    let raw = 0;
    let measuredKeys = 0;
    for (const page of pages) {
      const key = `${keyPrefix}:{${page.company}:${page.resource}}:co:list:${page.query}`;
      const usage: unknown = await redis.call('MEMORY', 'USAGE', key);
      if (typeof usage !== 'number') continue; // no such key
      stored += usage;
      strlen += await redis.strlen(key);
      raw += page.body.length;
      measuredKeys += 1;
    }
    const storedRatio = stored / raw;
    const pass = measuredKeys === pages.length && storedRatio <= TARGET_STORED_RATIO;
    say(`Redis bytes per stored page: ${String(measuredKeys)}/${String(pages.length)} page entries found`);
    say(
      `  MEMORY USAGE ${fmtInt(stored / measuredKeys)} B, value ${fmtInt(strlen / measuredKeys)} B, raw JSON ${fmtInt(raw / measuredKeys)} B → ` +
        `${fmt(storedRatio, 3)}× (value alone ${fmt(strlen / raw, 3)}×) (target ≤ ${String(TARGET_STORED_RATIO)}×): ${verdict(pass)}`,
    );
    return {
      measuredKeys,
      pages: pages.length,
      storedRatio,
      valueRatio: strlen / raw,
      rawBytes: raw / measuredKeys,
      pass,
    };
  } finally {
    redis.disconnect();
  }
}
