import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Vitest 4 no longer skips dist/ by itself: without this, compiled copies would run twice.
    exclude: ['dist/**', 'node_modules/**'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 30_000,
    env: { LOG_LEVEL: 'silent' },
  },
});
