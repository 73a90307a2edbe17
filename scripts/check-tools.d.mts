/** The types of check-tools.mjs (plain JavaScript, so that any Node runs it), for the tests. */

/** Exit code of a command stopped by the check. */
export declare const TOOLS_EXIT_CODE: number;

export interface Tool {
  readonly name: string;
  /** The Debian package that brings it. */
  readonly package: string;
  /** What the suites use it for, as the message says. */
  readonly purpose: string;
  /** Looked up on PATH and in the system directories. */
  readonly command?: string;
  /** That exact path. */
  readonly file?: string;
}

/** Every program the suites run. */
export declare const TOOLS: readonly Tool[];

/** The tools that cannot be found on `pathVariable`'s directories and `systemDirs`. */
export declare function missingTools(
  pathVariable: string,
  systemDirs?: readonly string[],
  tools?: readonly Tool[],
): readonly Tool[];

/** The message for missing tools, with the install line. */
export declare function toolsProblem(missing: readonly Tool[]): string;
