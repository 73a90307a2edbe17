/**
 * Builds `dist/` (and `dist-bench/`, for the load test) before the suite: the process-level tests
 * run the compiled entry points (`npm start`, `npm run sandbox`, `npm run token`, `npm run
 * loadtest`) exactly as users do.
 */
import { execFileSync } from 'node:child_process';

export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], {
    stdio: 'inherit',
  });
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.bench.json'], {
    stdio: 'inherit',
  });
}
