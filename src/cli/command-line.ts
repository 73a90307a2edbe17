/**
 * The command line of every entry point (`dist/main.js`, the sandbox, the token CLI): its own
 * options plus `--help` (`-h`) and `--version`, read strictly (`parseArgs` with `strict: true`,
 * no positionals). `--help` prints the usage and `--version` the name and version, both to stdout
 * with exit code 0, before anything starts; an unknown option or a stray argument prints the
 * problem and the usage to stderr, exit code 2.
 */
import { messageOf } from '../errors/proxy-error.js';
import { PACKAGE_VERSION } from '../platform/package.js';

export interface Command {
  /** As `--version` prints it, e.g. `slab-ops-proxy token`. */
  readonly name: string;
  readonly usage: string;
}

/** Spread into every command's `parseArgs` options. */
export const STANDARD_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
} as const;

/** Exit code of a bad command line (and of a bad configuration), as the start has always used. */
export const USAGE_EXIT_CODE = 2;

/** Prints the problem and the usage to stderr and exits 2. */
export function exitWithUsage(command: Command, problem: string): never {
  process.stderr.write(`${command.name}: ${problem}\n${command.usage}\n`);
  process.exit(USAGE_EXIT_CODE);
}

interface StandardValues {
  readonly values: { readonly help?: boolean | undefined; readonly version?: boolean | undefined };
}

/**
 * Runs the command's `parse` (its `parseArgs` call, given the arguments), answers `--help` and
 * `--version`, and returns what was parsed otherwise.
 */
export function parseCommandLine<Parsed extends StandardValues>(
  command: Command,
  parse: (args: string[]) => Parsed,
  args: readonly string[] = process.argv.slice(2),
): Parsed {
  let parsed: Parsed;
  try {
    parsed = parse([...args]);
  } catch (error) {
    // Node's messages name the option and say what is wrong with it; nothing secret is in them.
    exitWithUsage(command, messageOf(error));
  }
  if (parsed.values.help === true) {
    process.stdout.write(`${command.usage}\n`);
    process.exit(0);
  }
  if (parsed.values.version === true) {
    process.stdout.write(`${command.name} ${PACKAGE_VERSION}\n`);
    process.exit(0);
  }
  return parsed;
}
