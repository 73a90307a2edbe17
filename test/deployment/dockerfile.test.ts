/**
 * No Docker engine runs on the project's machines, so the Dockerfile is checked for what can be
 * checked: every COPY source exists, stages are named and referenced correctly, the load
 * generator's stage has every file its build compiles, the scripts it runs exist in package.json,
 * and the command it starts is a file the build produces.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { shippedNodeFlags } from '../../bench/lib/services.js';
import { filesUnder, importsOf } from '../helpers/files.js';

const dockerfile = readFileSync('Dockerfile', 'utf8');
const lines = dockerfile.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;

describe('Dockerfile', () => {
  const stages = lines.filter((l) => l.startsWith('FROM ')).map((l) => l.split(/\s+AS\s+/i)[1]?.trim());

  it('has its stages, each built on an image or an earlier stage', () => {
    expect(stages).toEqual(['deps', 'build', 'loadgen', 'runtime']);
    const bases = lines.filter((l) => l.startsWith('FROM ')).map((l) => l.split(/\s+/)[1] ?? '');
    bases.forEach((base, index) => {
      if (!base.includes(':')) expect(stages.slice(0, index)).toContain(base);
    });
  });

  it('copies only files that exist, from stages that exist', () => {
    for (const line of lines.filter((l) => l.startsWith('COPY '))) {
      const parts = line.split(/\s+/).slice(1);
      const from = parts.find((p) => p.startsWith('--from='))?.slice('--from='.length);
      const sources = parts.filter((p) => !p.startsWith('--')).slice(0, -1);
      if (from !== undefined) {
        expect(stages).toContain(from);
        continue;
      }
      for (const source of sources) expect(existsSync(source), source).toBe(true);
    }
  });

  it('copies into the load generator’s stage every file its build compiles', () => {
    const from = lines.findIndex((l) => /^FROM \S+ AS loadgen$/i.test(l));
    const to = lines.findIndex((l, index) => index > from && l.startsWith('FROM '));
    const copied = lines
      .slice(from, to)
      .filter((l) => l.startsWith('COPY ') && !l.includes('--from='))
      .flatMap((l) => l.split(/\s+/).slice(1, -1));
    // What `tsc -p tsconfig.bench.json` compiles there: bench/, and every file it imports, wherever.
    const reached = new Set<string>();
    const visit = (file: string): void => {
      if (reached.has(file) || !existsSync(file)) return;
      reached.add(file);
      for (const next of importsOf(file)) visit(next);
    };
    for (const file of filesUnder('bench', '.ts')) visit(file);
    expect(reached).toContain('test/support/free-port.ts'); // the walk leaves bench/
    const missing = [...reached].filter((file) => !copied.some((source) => file.startsWith(`${source}/`)));
    expect(missing).toEqual([]);
  });

  it('runs scripts that exist and starts the built entry point', () => {
    for (const match of dockerfile.matchAll(/npm run (\S+)/g)) expect(scripts[match[1] ?? '']).toBeDefined();
    const commands = lines.filter((l) => l.startsWith('CMD '));
    // The runtime stage's command is the last, `npm start`'s word for word: the runtime flags are
    // set there (docs/operations.md#the-runtime-flag), and the bench's replicas read them from there.
    const start = scripts.start?.split(' ') ?? [];
    expect(start).toEqual(['node', ...shippedNodeFlags(), 'dist/main.js']);
    expect(shippedNodeFlags()).toEqual(['--max-semi-space-size=32', '--min-semi-space-size=32']); // the flags the docs explain
    expect(commands.at(-1)).toBe(`CMD ${JSON.stringify(start)}`.replaceAll(',', ', '));
    // The load generator's command is its stage's.
    expect(commands).toContain('CMD ["node", "dist-bench/bench/loadgen.js"]');
    expect(existsSync('bench/loadgen.ts')).toBe(true);
    expect(existsSync('src/main.ts')).toBe(true);
  });
});
