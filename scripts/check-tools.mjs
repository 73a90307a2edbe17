/**
 * The tools check that `npm test` (and `npm run coverage`) makes before any test runs: the suites
 * use real programs — `redis-server` processes on free ports, `promtool` on the alert rules,
 * Debian's Chromium as the judge of the load test's report, `wrk`, nginx and HAProxy as the
 * bench's generator and anchors, `curl` as a client of the documented examples. Without one, a
 * suite would fail minutes later with an error about a spawn; here the command stops at once, with
 * exit code 2, the tools missing, what each is for, and the one `apt-get install` line that brings
 * them (README, "Two commands on a fresh machine").
 *
 * Plain JavaScript that any Node ≥ 18 runs, with no dependency, like check-node.mjs. Its types are
 * in check-tools.d.mts, for the tests.
 *
 *   node scripts/check-tools.mjs [--packages]
 *
 * --packages  print the missing tools' Debian packages on one line (nothing when none) and exit 0:
 *             what `.ci/run` installs, so that the list of tools has one definition
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import process from 'node:process';
import { isProgram } from './check-node.mjs';

/** Exit code of a command stopped by a check, as check-node.mjs's. */
export const TOOLS_EXIT_CODE = 2;

/**
 * Every program the suites run, with the Debian package that brings it. `command`: looked up on
 * PATH and in the system directories where Debian puts servers; `file`: that exact path.
 * @type {readonly { name: string, package: string, purpose: string, command?: string, file?: string }[]}
 */
export const TOOLS = [
  {
    name: 'redis-server',
    command: 'redis-server',
    package: 'redis-server',
    purpose: 'the Redis servers the tests start',
  },
  { name: 'promtool', command: 'promtool', package: 'prometheus', purpose: 'checks the alert rules' },
  {
    name: 'chromium',
    file: '/usr/bin/chromium',
    package: 'chromium',
    purpose: "looks at the load test's HTML report",
  },
  { name: 'wrk', command: 'wrk', package: 'wrk', purpose: "the bench's load generator" },
  { name: 'nginx', command: 'nginx', package: 'nginx', purpose: "the bench's nginx anchor" },
  { name: 'haproxy', command: 'haproxy', package: 'haproxy', purpose: "the bench's HAProxy anchor" },
  { name: 'curl', command: 'curl', package: 'curl', purpose: 'runs the documented curl examples' },
];

/** Where Debian puts the servers' programs, which a user's PATH may leave out. */
const SYSTEM_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin'];

/**
 * @param {string} path
 * @returns {boolean}
 */
function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The tools that cannot be found, searching `pathVariable`'s directories and `systemDirs`.
 * @param {string} pathVariable
 * @param {readonly string[]} [systemDirs]
 * @param {typeof TOOLS} [tools]
 * @returns {typeof TOOLS}
 */
export function missingTools(pathVariable, systemDirs = SYSTEM_DIRS, tools = TOOLS) {
  const dirs = [...pathVariable.split(delimiter).filter((dir) => dir !== ''), ...systemDirs];
  return tools.filter((tool) => {
    if (tool.file !== undefined) return !executable(tool.file);
    const command = tool.command ?? tool.name;
    return !dirs.some((dir) => executable(join(dir, command)));
  });
}

/**
 * The message for missing tools: each with its purpose, then the install line (Debian's packages,
 * without their recommends, as `.ci/run` installs them).
 * @param {typeof TOOLS} missing
 * @returns {string}
 */
export function toolsProblem(missing) {
  const packages = [...new Set(missing.map((tool) => tool.package))];
  return [
    `slab-ops-proxy: the tests need programs this machine does not have:`,
    ...missing.map((tool) => `  ${tool.name}: ${tool.purpose}`),
    'Install them (Debian, as root) with:',
    `  apt-get install -y --no-install-recommends ${packages.join(' ')}`,
  ].join('\n');
}

/**
 * @param {readonly string[]} args
 * @returns {number}
 */
function main(args) {
  if (args.length > 1 || (args.length === 1 && args[0] !== '--packages')) {
    process.stderr.write('usage: node scripts/check-tools.mjs [--packages]\n');
    return TOOLS_EXIT_CODE;
  }
  const missing = missingTools(process.env.PATH ?? '');
  if (args[0] === '--packages') {
    const packages = [...new Set(missing.map((tool) => tool.package))];
    if (packages.length > 0) process.stdout.write(`${packages.join(' ')}\n`);
    return 0;
  }
  if (missing.length === 0) return 0;
  process.stderr.write(`${toolsProblem(missing)}\n`);
  return TOOLS_EXIT_CODE;
}

if (isProgram(import.meta.url)) process.exitCode = main(process.argv.slice(2));
