/**
 * The documentation's generated tables match the catalog and the error registry, and the README's
 * first screen tells a newcomer how to start.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED_TABLES, renderTables } from '../../src/docs/doc-tables.js';

describe('the generated tables', () => {
  it('are where a reader of the client contract looks for them', () => {
    expect(Object.keys(GENERATED_TABLES['docs/clients.md'] ?? {})).toEqual(['resources', 'errors']);
  });

  for (const file of Object.keys(GENERATED_TABLES))
    it(`are current in ${file} (run \`npm run docs\` to refresh them)`, () => {
      const text = readFileSync(file, 'utf8');
      expect(renderTables(file, text)).toBe(text);
    });
});

describe('README', () => {
  it('tells a newcomer the two commands', () => {
    const firstScreen = readFileSync('README.md', 'utf8').split('\n').slice(0, 40).join('\n');
    expect(firstScreen).toContain('npm start');
    expect(firstScreen).toContain('npm test');
  });
});
