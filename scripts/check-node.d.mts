/** The types of check-node.mjs (plain JavaScript, so that any Node runs it), for the tests. */

/** Exit code of a command stopped by the check. */
export declare const RUNTIME_EXIT_CODE: number;

/** Whether the version (`24.11.0`, `v20.20.2`) satisfies the range, as npm reads `engines`. */
export declare function satisfies(version: string, range: string): boolean;

/** The lowest major version the range admits: the one `npx -p node@<major>` fetches. */
export declare function lowestMajor(range: string): number;

/** The command a person typed, from the npm script running the check; undefined outside npm. */
export declare function npmCommand(lifecycleEvent: string | undefined): string | undefined;

/** `engines.node` of package.json's text. */
export declare function enginesRange(packageJson: string): string;

export interface RuntimeFacts {
  /** The Node.js version judged. */
  readonly found: string;
  /** Where that Node.js is, as the message names it. */
  readonly execPath: string;
  readonly range: string;
  /** As `npmCommand` gives it. */
  readonly command: string | undefined;
}

/** The message for a Node.js outside the range, or undefined when it is inside. */
export declare function runtimeProblem(facts: RuntimeFacts): string | undefined;

/** Whether the module at `moduleUrl` (its `import.meta.url`) is the program Node runs. */
export declare function isProgram(moduleUrl: string): boolean;
