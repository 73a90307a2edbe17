/**
 * The documentation's generated tables match the catalog and the error registry; the README's
 * first screen tells a newcomer how to start, and the README stays a short front door that leads to
 * every page of docs/.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED_TABLES, renderTables } from '../../src/reference/doc-tables.js';

describe('the generated tables', () => {
  it('are where a reader looks for them', () => {
    expect(Object.keys(GENERATED_TABLES['docs/clients.md'] ?? {})).toEqual(['resources', 'errors']);
    expect(Object.keys(GENERATED_TABLES['README.md'] ?? {})).toEqual(['resource-groups']);
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

  it('stays a front door: about 300 lines, the reference text in docs/', () => {
    expect(readFileSync('README.md', 'utf8').split('\n').length).toBeLessThanOrEqual(320);
  });

  it('leads to every page of docs/, itself or through docs/README.md', () => {
    const linked = new Set<string>();
    for (const file of ['README.md', 'docs/README.md'])
      for (const match of readFileSync(file, 'utf8').matchAll(/\]\(([^)#:]+)(?:#[^)]*)?\)/g))
        linked.add(normalize(join(dirname(file), match[1] ?? '')));
    const pages = readdirSync('docs')
      .filter((name) => name.endsWith('.md'))
      .map((name) => join('docs', name));
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
  });
});
