/**
 * The docs and the code cite each other by path, and those paths hold: every `src/…`, `test/…`,
 * `bench/…`, `scripts/…`, `config/…` and `deploy/…` path and every `docs/…` file or anchor that
 * the README, the docs, the comments of src/, bench/, scripts/ and test/, and the config and
 * deployment files name exists, and so does every file and anchor the README and the docs link to
 * (docs/architecture.md#how-slab-ops-proxy-is-built).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder } from '../helpers/files.js';

const SOURCES = filesUnder('src', '.ts');
/** The other code and the deployment files, whose comments cite the docs too. */
const OTHER_CODE = [
  ...['bench', 'scripts', 'test'].flatMap((dir) => filesUnder(dir, '.ts')),
  ...['config', 'deploy'].flatMap((dir) => filesUnder(dir, '')),
  'Dockerfile',
  'docker-compose.yml',
  '.ci/run',
];
const README = readFileSync('README.md', 'utf8');
const DOCS = filesUnder('docs', '.md');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const match of markdown.matchAll(/^#{1,6}\s+(.+)$/gm)) anchors.add(slug(match[1] ?? ''));
  for (const match of markdown.matchAll(/<a id="([^"]+)"><\/a>/g)) anchors.add(match[1] ?? '');
  return anchors;
}

describe('the paths and anchors the README, the docs and the code name', () => {
  const texts = [
    { file: 'README.md', text: README },
    ...DOCS.map((file) => ({ file, text: readFileSync(file, 'utf8') })),
    ...[...SOURCES, ...OTHER_CODE].map((file) => ({ file, text: readFileSync(file, 'utf8') })),
  ];

  it('every src/… path exists', () => {
    const missing: string[] = [];
    for (const { file, text } of texts) {
      for (const match of text.matchAll(/(?<![\w./-])src\/[A-Za-z0-9_./-]*[A-Za-z0-9_/]/g)) {
        const path = match[0];
        if (!existsSync(path)) missing.push(`${file}: ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every test/…, bench/…, scripts/…, config/… and deploy/… path exists', () => {
    const missing: string[] = [];
    for (const { file, text } of texts) {
      for (const match of text.matchAll(
        /(?<![\w./-])(?:test|bench|scripts|config|deploy)\/[A-Za-z0-9_./-]*[A-Za-z0-9_/]/g,
      )) {
        const path = match[0];
        // A `.js` path names a compiled file (dist/, dist-bench/), which the repository does not hold.
        if (!path.endsWith('.js') && !existsSync(path)) missing.push(`${file}: ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every docs/… file and anchor exists', () => {
    const missing: string[] = [];
    for (const { file, text } of texts) {
      for (const match of text.matchAll(/(?<![\w./-])docs\/([A-Za-z0-9_.-]+\.[a-z]+)(?:#([A-Za-z0-9_-]+))?/g)) {
        const target = `docs/${match[1] ?? ''}`;
        if (!existsSync(target)) {
          missing.push(`${file}: ${target}`);
          continue;
        }
        const anchor = match[2];
        if (anchor !== undefined && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
          missing.push(`${file}: ${target}#${anchor}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('every link of the README and the docs has its file and its anchor', () => {
    const missing: string[] = [];
    for (const file of ['README.md', ...DOCS]) {
      const text = readFileSync(file, 'utf8');
      const anchors = anchorsOf(text);
      for (const match of text.matchAll(/\]\(#([^)]+)\)/g))
        if (!anchors.has(match[1] ?? '')) missing.push(`${file}: #${match[1] ?? ''}`);
      // Relative links, resolved from the linking file as a Markdown viewer does; an anchor into
      // another Markdown file must be one of its headings or `<a id>`s.
      for (const match of text.matchAll(/\]\(((?:\.\.\/)*[A-Za-z0-9_./-]+)(?:#([^)]*))?\)/g)) {
        const target = normalize(join(dirname(file), match[1] ?? ''));
        const anchor = match[2];
        if (/^[a-z]+:/.test(match[1] ?? '')) continue;
        if (!existsSync(target)) missing.push(`${file}: ${relative('.', target)}`);
        else if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
          missing.push(`${file}: ${relative('.', target)}#${anchor}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
