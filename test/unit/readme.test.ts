/** The README's generated tables match the catalog and the error registry. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderReadme } from '../../src/docs/readme-tables.js';

describe('README', () => {
  it('has current resource and error tables (run `npm run docs` to refresh them)', () => {
    const readme = readFileSync('README.md', 'utf8');
    expect(renderReadme(readme)).toBe(readme);
  });

  it('tells a newcomer the two commands', () => {
    const firstScreen = readFileSync('README.md', 'utf8').split('\n').slice(0, 40).join('\n');
    expect(firstScreen).toContain('npm start');
    expect(firstScreen).toContain('npm test');
  });
});
