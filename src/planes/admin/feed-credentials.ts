/**
 * The change feed's credentials (docs/operations.md#the-change-feed): tokens that may only
 * invalidate, from `INVALIDATE_TOKEN` and from the lines of `INVALIDATE_TOKEN_FILE`, every one
 * accepted, so that a rotation needs no restart: add the new token to the file, move the feed to
 * it, remove the old one. This class owns the digests of the tokens in force; the tokens
 * themselves are kept nowhere past their reading, and registered so that no log line shows one.
 *
 * The file is read at the start (unreadable, or without a token: the start stops, naming it), on
 * `SIGHUP`, and whenever the file, its size or its modification time change, looked at every 2 s:
 * a Kubernetes secret volume swaps a symlink to a new directory, which `fs.watch` on the file
 * does not report, while `stat` follows the link to the new file. A re-read that finds the file
 * unreadable or empty keeps the tokens in force and warns: a file being rewritten, or a volume
 * being remounted, must not lock the feed out, and an operator's decision never lapses by accident.
 */
import { readFileSync, type Stats, statSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import { ConfigError } from '../../config/load.js';
import { registerSecret } from '../../observability/secrets.js';
import { digestIn, tokenDigest } from './bearer-digest.js';

/** How often the file is looked at, ms. */
export const POLL_MS = 2_000;

/** What a re-read did: other tokens in force, the same ones, or the ones in force kept (the file unreadable or empty). */
export type FeedReread = 'replaced' | 'unchanged' | 'kept';

export interface FeedCredentialsOptions {
  /** `INVALIDATE_TOKEN`. */
  readonly token?: string | undefined;
  /** `INVALIDATE_TOKEN_FILE`. */
  readonly file?: string | undefined;
  readonly log: Pick<Logger, 'info' | 'warn'>;
  /** How often the file is looked at, ms (`POLL_MS`). */
  readonly pollMs?: number;
}

/** The tokens of a file's text: one a line, blank lines and the whitespace around a token ignored. */
export function tokensOf(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** What tells one version of the file from another: which file it is (a swapped link names another), its size and time. */
function stampOf(stats: Stats): string {
  return `${String(stats.dev)}:${String(stats.ino)}:${String(stats.size)}:${String(stats.mtimeMs)}`;
}

function codeOf(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unreadable';
}

function digestsOf(tokens: readonly string[]): Buffer[] {
  for (const token of tokens) registerSecret(token);
  return tokens.map(tokenDigest);
}

function sameDigests(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  return a.length === b.length && a.every((digest) => b.some((other) => other.equals(digest)));
}

/** The file at the start: a problem stops the start, as a bad variable does (docs/configuration.md#environment). */
function readAtStart(file: string): { readonly digests: Buffer[]; readonly stamp: string } {
  let text: string;
  let stats: Stats;
  try {
    stats = statSync(file);
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError('INVALIDATE_TOKEN_FILE', `cannot read ${file}`);
  }
  const tokens = tokensOf(text);
  if (tokens.length === 0) throw new ConfigError('INVALIDATE_TOKEN_FILE', `${file} holds no token (one a line)`);
  return { digests: digestsOf(tokens), stamp: stampOf(stats) };
}

export class FeedCredentials {
  readonly #fromEnv: readonly Buffer[];
  #fromFile: readonly Buffer[] = [];
  readonly #file: string | undefined;
  readonly #log: Pick<Logger, 'info' | 'warn'>;
  /** The file as last looked at (its stamp, or why it could not be read): the poll reads it when it differs. */
  #seen = '';
  /** Re-reads run one after another, so that each sees the file as it is once it was asked for. */
  #reads: Promise<unknown> = Promise.resolve();
  readonly #listeners: Array<(result: FeedReread) => void> = [];
  readonly #timer: NodeJS.Timeout | undefined;

  /** Reads the file at once: throws `ConfigError` when it cannot be read or holds no token. */
  constructor(options: FeedCredentialsOptions) {
    this.#fromEnv = options.token === undefined ? [] : digestsOf([options.token]);
    this.#file = options.file;
    this.#log = options.log;
    if (options.file === undefined) return;
    const { digests, stamp } = readAtStart(options.file);
    this.#fromFile = digests;
    this.#seen = stamp;
    this.#timer = setInterval(() => void this.#poll(), options.pollMs ?? POLL_MS);
    this.#timer.unref();
  }

  /** Whether `presented` (a token's digest: bearer-digest.ts) is one of the feed's tokens, compared in constant time. */
  accepts(presented: Buffer): boolean {
    return digestIn(presented, [...this.#fromEnv, ...this.#fromFile]);
  }

  /** Reads the file again (`SIGHUP`); settles once its tokens, or the ones kept, are in force. */
  reread(): Promise<FeedReread> {
    const file = this.#file;
    if (file === undefined) return Promise.resolve('unchanged');
    const read = this.#reads.then(() => this.#read(file));
    // A listener that throws fails its own re-read, never the next ones.
    this.#reads = read.catch(() => undefined);
    return read;
  }

  /** `listener` is told of every re-read from now on, by `SIGHUP` or by the poll. */
  onReread(listener: (result: FeedReread) => void): void {
    this.#listeners.push(listener);
  }

  close(): void {
    clearInterval(this.#timer);
  }

  async #poll(): Promise<void> {
    if (this.#file === undefined) return;
    let stamp: string;
    try {
      stamp = stampOf(await stat(this.#file));
    } catch (error) {
      stamp = codeOf(error);
    }
    if (stamp !== this.#seen) await this.reread();
  }

  async #read(file: string): Promise<FeedReread> {
    const result = await this.#readTokens(file);
    for (const listener of this.#listeners) listener(result);
    return result;
  }

  /** Never logs a token: the file's name, how many it holds, and why it was not taken. */
  async #readTokens(file: string): Promise<FeedReread> {
    let text: string;
    let looked = false;
    try {
      this.#seen = stampOf(await stat(file));
      looked = true;
      text = await readFile(file, 'utf8');
    } catch (error) {
      // The poll reads it again once that changes: the stamp of a file it could not read, or why it could not look.
      if (!looked) this.#seen = codeOf(error);
      this.#log.warn({ file, reason: codeOf(error) }, 'invalidate token file unreadable; the tokens in force stay');
      return 'kept';
    }
    const tokens = tokensOf(text);
    if (tokens.length === 0) {
      this.#log.warn({ file, reason: 'empty' }, 'invalidate token file holds no token; the tokens in force stay');
      return 'kept';
    }
    const digests = digestsOf(tokens);
    if (sameDigests(digests, this.#fromFile)) return 'unchanged';
    this.#fromFile = digests;
    this.#log.info({ file, tokens: digests.length }, 'invalidate tokens re-read; the file’s tokens in force');
    return 'replaced';
  }
}
