import { defineConfig } from 'vitest/config';

/**
 * Suites that run several processes (proxy replicas, redis-server) or kill, pause and restart
 * Redis, and assert bounds that a starved CPU would break (a Redis command answered within its
 * 100 ms timeout, exact shared counts). They run after the rest, one file at a time, so that
 * on a 2-core machine each has the CPU to itself rather than racing another such suite.
 */
const EXCLUSIVE = [
  'test/integration/admin.test.ts',
  'test/integration/bench-generators.test.ts',
  'test/integration/cache-redis-failure.test.ts',
  'test/integration/config-check.test.ts',
  'test/integration/entry-points.test.ts',
  'test/integration/lifecycle.test.ts',
  'test/integration/limits-leases.test.ts',
  'test/integration/loadtest.test.ts',
  'test/integration/log-redaction.test.ts',
  'test/integration/metrics.test.ts',
  'test/integration/store-contract.test.ts',
  'test/integration/upstream-budget.test.ts',
];

const shared = {
  globalSetup: ['test/global-setup.ts'],
  pool: 'forks' as const,
  testTimeout: 20_000,
  hookTimeout: 30_000,
  env: { LOG_LEVEL: 'silent' },
};

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...shared,
          name: 'parallel',
          include: ['test/**/*.test.ts'],
          // Vitest 4 no longer skips dist/ by itself: without this, compiled copies would run twice.
          exclude: ['dist/**', 'node_modules/**', 'test/system/**', ...EXCLUSIVE],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: 'exclusive',
          include: ['test/system/**/*.test.ts', ...EXCLUSIVE],
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
