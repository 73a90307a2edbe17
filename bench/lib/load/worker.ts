/**
 * The Node load generators as their own process, so that they can be pinned to the client's
 * CPU apart from the orchestrator: `node dist-bench/bench/lib/load/worker.js --autocannon|--paced
 * <spec.json>` prints one JSON line, the result.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runAutocannon } from './autocannon.js';
import { runPaced } from './paced.js';
import type { LoadResult, LoadSpec } from './types.js';

async function main(mode: string | undefined, specFile: string | undefined): Promise<void> {
  if ((mode !== '--autocannon' && mode !== '--paced') || specFile === undefined)
    throw new Error('usage: worker.js --autocannon|--paced <spec.json>');
  const spec = JSON.parse(readFileSync(specFile, 'utf8')) as LoadSpec;
  const result: LoadResult = mode === '--autocannon' ? await runAutocannon(spec) : await runPaced(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv[2], process.argv[3]).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`load worker: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
