/**
 * The architecture as written down is the architecture in the code (docs/architecture.md#the-layers):
 * - the code-layout table (docs/development.md#code-layout) names every folder of `src/` and
 *   nothing that is not there;
 * - every import goes to its own folder or to a layer below (the table's order), and no import
 *   circle exists between files;
 * - the sandbox system of record implements the seed's rules on its own: nothing in `src/sandbox/`
 *   imports the proxy's rule modules, and the server the tests judge the proxy against does not
 *   reach them even through another module (docs/architecture.md#the-system-of-record-stands-apart).
 * That the paths and anchors the docs and the code name exist: test/docs/citations.test.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { filesUnder, importsOf } from '../helpers/files.js';

const SOURCES = filesUnder('src', '.ts');
/** Where the code-layout table is, between `<!-- layout:start -->` and `<!-- layout:end -->`. */
const LAYOUT_DOC = 'docs/development.md';

/** The layout table: each row's units (a folder of src/, or a file at its top) and its layer, top first. */
function layoutRows(): Array<{ readonly units: string[]; readonly layer: string }> {
  const text = readFileSync(LAYOUT_DOC, 'utf8');
  const start = text.indexOf('<!-- layout:start -->');
  const end = text.indexOf('<!-- layout:end -->');
  if (start === -1 || end === -1) throw new Error(`${LAYOUT_DOC} has no layout table`);
  return text
    .slice(start, end)
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [, folders = '', layer = ''] = line.split('|');
      return {
        units: [...folders.matchAll(/`(src\/[^`]+)`/g)].map((m) => (m[1] ?? '').replace(/\/$/, '')),
        layer: layer.trim(),
      };
    });
}

/** The unit a source file belongs to: its top-level folder under src/, or the file itself. */
function unitOf(file: string): string {
  const parts = file.split('/');
  return parts.length === 2 ? file : `src/${parts[1] ?? ''}`;
}

describe('the layers', () => {
  const rows = layoutRows();
  const layers = [...new Set(rows.map((row) => row.layer))];
  const layerOf = new Map(rows.flatMap((row) => row.units.map((unit) => [unit, layers.indexOf(row.layer)] as const)));

  it('the layout table names every folder of src/, and only those', () => {
    const actual = new Set(SOURCES.filter((file) => !file.startsWith('src/types/')).map(unitOf));
    expect([...layerOf.keys()].sort()).toEqual([...actual].sort());
  });

  it('every import goes to its own folder or to a layer below', () => {
    const upward: string[] = [];
    for (const file of SOURCES) {
      const from = layerOf.get(unitOf(file));
      if (from === undefined) continue; // src/types: declarations only
      for (const target of importsOf(file)) {
        const to = layerOf.get(unitOf(target));
        if (to === undefined || unitOf(target) === unitOf(file)) continue;
        // The programs may use each other (the sandbox's command line is the CLIs' own).
        if (to < from || (to === from && layers[from] !== 'programs')) upward.push(`${file} → ${target}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('no import circle between files', () => {
    const graph = new Map(SOURCES.map((file) => [file, importsOf(file).filter((target) => existsSync(target))]));
    const state = new Map<string, 'open' | 'done'>();
    const circles: string[] = [];
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        circles.push([...path.slice(path.indexOf(file)), file].join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of SOURCES) visit(file, []);
    expect(circles).toEqual([]);
  });
});

/**
 * The proxy's rules, which the sandbox must not share (docs/architecture.md#the-system-of-record-stands-apart): the
 * resources, permissions and value grammars (catalog), bearer parsing, token checks, claims and
 * authorisation (auth), the query grammar and canonical read (request), and the parts that apply
 * them to a request (the planes, the wiring, the cache, the upstream client and its guard, limits,
 * operator state).
 */
const PROXY_RULES = [
  'src/catalog',
  'src/auth',
  'src/request',
  'src/planes',
  'src/app.ts',
  'src/cache',
  'src/upstream',
  'src/limits',
  'src/upstream-guard',
  'src/control',
];
/** The system of record itself: what `createSandbox` is made of (its command line aside). */
const SANDBOX_SERVER = 'src/sandbox/server.ts';

function isProxyRule(file: string): boolean {
  return PROXY_RULES.some((unit) => file === unit || file.startsWith(`${unit}/`));
}

describe('the sandbox system of record stands apart from the proxy', () => {
  it('no file of src/sandbox/ imports a module of the proxy’s rules', () => {
    const shared: string[] = [];
    for (const file of SOURCES.filter((f) => f.startsWith('src/sandbox/'))) {
      for (const target of importsOf(file)) if (isProxyRule(target)) shared.push(`${file} → ${target}`);
    }
    expect(shared).toEqual([]);
  });

  it('the sandbox server reaches none of them through another module either', () => {
    const reached = new Set<string>();
    const paths: string[] = [];
    const visit = (file: string, path: readonly string[]): void => {
      if (reached.has(file)) return;
      reached.add(file);
      if (isProxyRule(file)) paths.push([...path, file].join(' → '));
      for (const next of importsOf(file)) if (existsSync(next)) visit(next, [...path, file]);
    };
    visit(SANDBOX_SERVER, []);
    // The walk did see the sandbox's own rule files (so an emptied import list cannot pass it).
    expect([...reached]).toEqual(
      expect.arrayContaining([
        'src/sandbox/resources.ts',
        'src/sandbox/credentials.ts',
        'src/sandbox/access.ts',
        'src/sandbox/query.ts',
      ]),
    );
    expect(paths).toEqual([]);
  });
});
