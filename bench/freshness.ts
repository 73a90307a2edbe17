/**
 * The freshness phase alone (`npm run bench:freshness`): each variant of bench/phases/freshness.ts
 * in turn, for tuning lifetimes and invalidations without the whole bench. The figures of record
 * come from `npm run bench`.
 */

import { say } from './lib/format.js';
import { type FreshnessVariant, freshnessSettings, runFreshness } from './phases/freshness.js';

const VARIANTS: readonly FreshnessVariant[] = ['fixed', 'invalidated'];

for (const variant of VARIANTS) {
  await runFreshness(freshnessSettings(), [], variant);
  say();
}
