/**
 * The config file in force on this replica: its one owner. A re-read file (`SIGHUP`,
 * docs/operations.md#reload-start-and-shutdown) is pushed, with its value, to the parts that apply
 * it at once; every other difference is reported as needing a restart.
 */
import type { FileConfig } from '../config/schema.js';

/**
 * What a running replica applies from a re-read config file; every other difference is reported
 * as needing a restart. Listed this way round so that a new setting is restart-only until someone
 * makes it reloadable on purpose.
 */
const RELOADABLE = [
  'cache.partition',
  'cache.defaults',
  'cache.resources',
  'upstream.maxConcurrent',
  'upstream.maxPerSecond',
  'upstream.companyWeights',
] as const;

/** Dotted paths of the leaves where two config documents differ. */
export function changedPaths(before: unknown, after: unknown, path = ''): string[] {
  const isRecord = (value: unknown): value is Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isRecord(before) || !isRecord(after)) return JSON.stringify(before) === JSON.stringify(after) ? [] : [path];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].flatMap((key) => changedPaths(before[key], after[key], path === '' ? key : `${path}.${key}`));
}

/** A part that applies a re-read file: given the file now in force and the one before it. */
export type ConfigApplier = (next: FileConfig, before: FileConfig) => void;

export class ConfigInForce {
  #current: FileConfig;
  readonly #appliers: ConfigApplier[] = [];

  constructor(initial: FileConfig) {
    this.#current = initial;
  }

  get current(): FileConfig {
    return this.#current;
  }

  /** `applier` is told of every re-read file from now on. */
  onReload(applier: ConfigApplier): void {
    this.#appliers.push(applier);
  }

  /** Puts `file` in force; returns the paths that differ but only take effect on a restart. */
  reload(file: FileConfig): string[] {
    const before = this.#current;
    const changed = changedPaths(before, file);
    this.#current = file;
    for (const apply of this.#appliers) apply(file, before);
    return changed.filter(
      (path) => !RELOADABLE.some((reloadable) => path === reloadable || path.startsWith(`${reloadable}.`)),
    );
  }
}
