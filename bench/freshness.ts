/**
 * The freshness phase alone (`npm run bench:freshness [-- mixed|pages|append|move|advice]`): each
 * run of bench/phases/freshness.ts in turn (or those of one workload), then the advice's accuracy
 * (bench/phases/advice-accuracy.ts; `advice`: it alone), for tuning lifetimes and invalidations
 * without the whole bench. The figures of record come from `npm run bench`.
 */

import { say } from './lib/format.js';
import { isFreshnessWorkload, pagesReadBy } from './lib/workloads.js';
import { runAdviceAccuracy } from './phases/advice-accuracy.js';
import { FRESHNESS_RUNS, freshnessSettings, runFreshness } from './phases/freshness.js';

const only = process.argv[2];
if (only !== undefined && only !== 'advice' && !isFreshnessWorkload(only)) {
  process.stderr.write('usage: npm run bench:freshness [-- mixed|pages|append|move|advice]\n');
  process.exit(2);
}
for (const [variant, workload] of Object.values(FRESHNESS_RUNS)) {
  // A workload's runs, and the run of its pages with nothing changing (its latency's yardstick).
  const still =
    variant === 'still' && only !== undefined && only !== 'advice' && pagesReadBy(workload) === pagesReadBy(only);
  if (only !== undefined && workload !== only && !still) continue;
  await runFreshness(freshnessSettings(), [], variant, workload);
  say();
}
if (only === undefined || only === 'advice') await runAdviceAccuracy([]);
