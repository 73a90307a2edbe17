/**
 * The docs' figures are pasted from what `npm run bench` and `npm run loadtest` print: each page
 * (docs/benchmarks.md, docs/load-test.md) holds a stamp (command, date, cores) and tables in
 * exactly the form the code writes today, so a change of format shows here until the page gets a
 * new run's lines. The bench's verdicts themselves: test/unit/bench-report.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BENCHMARKS_DOC, LOAD_TEST_DOC, markdownTable } from '../../bench/lib/format.js';
import { FIGURES_HEADER, VERDICTS_HEADER } from '../../bench/report.js';

const headerLines = (header: readonly string[], align?: readonly ('left' | 'right')[]): string[] =>
  markdownTable(header, [], align);

describe('the docs’ figures', () => {
  it(`${BENCHMARKS_DOC}: a stamped run of npm run bench, in the tables it prints`, () => {
    const text = readFileSync(BENCHMARKS_DOC, 'utf8');
    expect(text).toMatch(/^`npm run bench`, \d{4}-\d{2}-\d{2}, \d+ cores?, (wrk|autocannon) \S+, /m);
    const lines = text.split('\n');
    const figures = headerLines(FIGURES_HEADER);
    const verdictLines = headerLines(VERDICTS_HEADER, ['left', 'left', 'left']);
    expect(lines).toContain(figures[0]);
    expect(lines).toContain(figures[1]);
    expect(lines).toContain(verdictLines[0]);
    expect(lines).toContain(verdictLines[1]);
    // The anchors are in it: the bare server, nginx, the proxy.
    expect(lines.some((l) => l.startsWith('| bare node:http |'))).toBe(true);
    expect(lines.some((l) => l.startsWith('| nginx proxy_cache |'))).toBe(true);
    expect(lines.some((l) => l.startsWith('| proxy cache hits |'))).toBe(true);
  });

  it(`${LOAD_TEST_DOC}: stamped runs of npm run loadtest (one Redis and a Redis Cluster), and a picture of the report`, () => {
    const text = readFileSync(LOAD_TEST_DOC, 'utf8');
    expect(text).toMatch(/^`npm run loadtest`, \d{4}-\d{2}-\d{2}, \d+ cores?, \d+ replicas?, one Redis, /m);
    expect(text).toMatch(/^`npm run loadtest`, \d{4}-\d{2}-\d{2}, \d+ cores?, \d+ replicas?, Redis Cluster, /m);
    expect(text.split('\n')).toContain('| figure | this run |');
    // A relative link from the page, as a Markdown viewer resolves it.
    const image = /!\[[^\]]+\]\(([^):]+\.png)\)/.exec(text)?.[1];
    expect(image).toBeDefined();
    expect(existsSync(join(dirname(LOAD_TEST_DOC), image ?? ''))).toBe(true);
  });
});
