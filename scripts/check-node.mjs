/**
 * The runtime check that every npm script running the proxy, its CLIs or its tests makes first
 * (the `pre…` scripts of package.json): the `node` on PATH, the one the script then runs, must
 * satisfy package.json's `engines.node`. On an older Node the command stops here, before the build
 * and before any of the program's modules load, with exit code 2 and one message on stderr: the
 * Node.js it needs, the one it found, and the line that runs the same command on the right one
 * (README, "Two commands on a fresh machine"). Without this an old Node fails later and somewhere
 * else, e.g. `npm start` on Node 20 with `secret.toCryptoKey is not a function`.
 *
 * Plain JavaScript that any Node ≥ 18 runs, with no dependency: it runs on whatever `node` the
 * machine has, before `npm install`'s packages or the build are known to work there. Its types are
 * in check-node.d.mts, for the tests.
 *
 *   node scripts/check-node.mjs [--node-version X.Y.Z]
 *
 * --node-version  judge this version instead of the running Node's (how the tests play an older one)
 */
import { readFileSync, realpathSync } from 'node:fs';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

/** Exit code of a start that cannot run as configured, the start's own (src/cli/command-line.ts). */
export const RUNTIME_EXIT_CODE = 2;

/** One comparator of a range: `>=24.11` is `{ op: '>=', parts: [24, 11] }`. */
const COMPARATOR = /^(>=|<=|>|<|=)?v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/;

/**
 * The range as alternatives (`||`) of comparators that must all hold. It reads the forms `engines`
 * uses here (`>=`, `>`, `<=`, `<`, `=` or none, on versions of one to three parts) and throws on
 * any other, so that a change to `engines` that this check cannot follow fails loudly.
 * @param {string} range
 * @returns {{ op: string, parts: number[] }[][]}
 */
function comparatorSets(range) {
  const sets = range.split('||').map((set) =>
    set
      .trim()
      .split(/\s+/)
      .filter((text) => text !== '')
      .map((text) => {
        const match = COMPARATOR.exec(text);
        if (match === null) throw new RangeError(`engines.node "${range}": cannot read "${text}"`);
        const parts = [match[2], match[3], match[4]].filter((part) => part !== undefined).map(Number);
        return { op: match[1] ?? '=', parts };
      }),
  );
  if (sets.some((set) => set.length === 0)) throw new RangeError(`engines.node "${range}": an empty alternative`);
  return sets;
}

/**
 * A version's parts, `v` and any pre-release or build suffix aside.
 * @param {string} version
 * @returns {number[]}
 */
function versionParts(version) {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (match === null) throw new RangeError(`"${version}" is not a Node.js version`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/**
 * Whether the version satisfies the range, as npm reads `engines`: a comparator's version compares
 * on the parts it gives, so `<25` admits every 24.x and `>=24.11` every 24.11.x and later.
 * @param {string} version
 * @param {string} range
 * @returns {boolean}
 */
export function satisfies(version, range) {
  const found = versionParts(version);
  return comparatorSets(range).some((set) =>
    set.every(({ op, parts }) => {
      const index = parts.findIndex((part, i) => part !== found[i]);
      const order = index === -1 ? 0 : Math.sign((found[index] ?? 0) - (parts[index] ?? 0));
      if (op === '>=') return order >= 0;
      if (op === '>') return order > 0;
      if (op === '<=') return order <= 0;
      if (op === '<') return order < 0;
      return order === 0;
    }),
  );
}

/**
 * The lowest major version the range admits: the one `npx -p node@<major>` fetches.
 * @param {string} range
 * @returns {number}
 */
export function lowestMajor(range) {
  const majors = comparatorSets(range).map((set) => {
    const floors = set.flatMap(({ op, parts }) => {
      const major = parts[0] ?? 0;
      if (op === '>=' || op === '=') return [major];
      if (op === '>') return [parts.length === 1 ? major + 1 : major];
      return [];
    });
    if (floors.length === 0) throw new RangeError(`engines.node "${range}": no lowest version`);
    return Math.max(...floors);
  });
  return Math.min(...majors);
}

/**
 * The command a person typed, from the npm script running this check (`npm_lifecycle_event`):
 * `prestart` is `npm start`, `pretest:soak` is `npm run test:soak`; undefined outside npm.
 * @param {string | undefined} lifecycleEvent
 * @returns {string | undefined}
 */
export function npmCommand(lifecycleEvent) {
  if (lifecycleEvent === undefined || lifecycleEvent === '') return undefined;
  const script = lifecycleEvent.startsWith('pre') ? lifecycleEvent.slice('pre'.length) : lifecycleEvent;
  return script === 'start' || script === 'test' ? `npm ${script}` : `npm run ${script}`;
}

/**
 * `engines.node` of package.json's text.
 * @param {string} packageJson
 * @returns {string}
 */
export function enginesRange(packageJson) {
  const range = JSON.parse(packageJson)?.engines?.node;
  if (typeof range !== 'string') throw new RangeError('package.json has no engines.node');
  return range;
}

/**
 * The message for a Node.js outside the range, or undefined when it is inside. The line it gives
 * is the README's (`npx -y -p node@24 -c '…'`: the official binary from the npm registry).
 * @param {{ found: string, execPath: string, range: string, command: string | undefined }} facts
 * @returns {string | undefined}
 */
export function runtimeProblem({ found, execPath, range, command }) {
  if (satisfies(found, range)) return undefined;
  const major = lowestMajor(range);
  const what = command === undefined ? 'the command' : `\`${command}\``;
  return (
    `slab-ops-proxy: needs Node.js ${range} (package.json "engines"), found ${found} (${execPath}). ` +
    `Run ${what} on Node.js ${major} with:\n  npx -y -p node@${major} -c '${command ?? '…'}'`
  );
}

/**
 * The check as a program: the message and exit code 2 on a Node outside `engines`, nothing
 * otherwise. A range or a version it cannot read stops the command too, with what it could not read.
 * @param {readonly string[]} args
 * @returns {number}
 */
function main(args) {
  const override = args[0] === '--node-version' ? args[1] : undefined;
  if (args.length > 0 && (override === undefined || args.length !== 2)) {
    process.stderr.write('usage: node scripts/check-node.mjs [--node-version X.Y.Z]\n');
    return RUNTIME_EXIT_CODE;
  }
  try {
    const problem = runtimeProblem({
      found: override ?? process.versions.node,
      execPath: process.execPath,
      range: enginesRange(readFileSync(new URL('../package.json', import.meta.url), 'utf8')),
      command: npmCommand(process.env.npm_lifecycle_event),
    });
    if (problem === undefined) return 0;
    process.stderr.write(`${problem}\n`);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`slab-ops-proxy: cannot check the Node.js version: ${message}\n`);
  }
  return RUNTIME_EXIT_CODE;
}

/**
 * Whether the module at `moduleUrl` is the program Node runs (`node scripts/check-node.mjs`), not
 * a module the tests (or another script) import: Node gives the main module's path with symbolic
 * links resolved.
 * @param {string} moduleUrl  the module's `import.meta.url`
 * @returns {boolean}
 */
export function isProgram(moduleUrl) {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === fileURLToPath(moduleUrl);
  } catch {
    return false; // `node -e`, or a path that is not a file: not this module
  }
}

if (isProgram(import.meta.url)) process.exitCode = main(process.argv.slice(2));
