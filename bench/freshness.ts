/**
 * The freshness phase alone (`npm run bench:freshness [-- mixed|pages]`): each run of
 * bench/phases/freshness.ts in turn (or those of one workload), for tuning lifetimes and
 * invalidations without the whole bench. The figures of record come from `npm run bench`.
 */

import { say } from './lib/format.js';
import { FRESHNESS_RUNS, freshnessSettings, runFreshness } from './phases/freshness.js';

const only = process.argv[2];
if (only !== undefined && only !== 'mixed' && only !== 'pages') {
  process.stderr.write('usage: npm run bench:freshness [-- mixed|pages]\n');
  process.exit(2);
}
for (const [variant, workload] of Object.values(FRESHNESS_RUNS)) {
  if (only !== undefined && workload !== only) continue;
  await runFreshness(freshnessSettings(), [], variant, workload);
  say();
}
