/**
 * The change feed's tokens (src/planes/admin/feed-credentials.ts) over real files: one a line,
 * blank lines and whitespace ignored; a start with a file that cannot be read, or holds none,
 * stops naming the variable; a re-read puts the file's new tokens in force and takes the removed
 * ones out; one that finds the file gone or empty keeps the tokens in force and warns; the poll
 * notices a rewritten file and a swapped symlink (a Kubernetes secret volume); no log line holds a
 * token.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/load.js';
import { tokenDigest } from '../../src/planes/admin/bearer-digest.js';
import { FeedCredentials, type FeedReread, tokensOf } from '../../src/planes/admin/feed-credentials.js';

let dir: string;
let lines: string[];
const opened: FeedCredentials[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'feed-credentials-'));
  lines = [];
});

afterEach(() => {
  for (const feed of opened.splice(0)) feed.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A logger whose lines the test reads. */
function log() {
  return pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
}

function open(options: { readonly token?: string; readonly file?: string; readonly pollMs?: number }): FeedCredentials {
  const feed = new FeedCredentials({ ...options, log: log() });
  opened.push(feed);
  return feed;
}

function write(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

const accepts = (feed: FeedCredentials, token: string): boolean => feed.accepts(tokenDigest(token));

/** Settles with the first re-read whose result is `result`. */
function reread(feed: FeedCredentials, result: FeedReread): Promise<void> {
  return new Promise((resolve) => feed.onReread((done) => done === result && resolve()));
}

function configErrorOf(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('the change feed’s token file', () => {
  it('holds one token a line; blank lines and the whitespace around a token are ignored', () => {
    expect(tokensOf('  first-token \n\n\tsecond-token\r\n   \nthird\n')).toEqual([
      'first-token',
      'second-token',
      'third',
    ]);
    expect(tokensOf(' \n\n')).toEqual([]);
  });

  it('accepts every token of the file and INVALIDATE_TOKEN, and nothing else', () => {
    const feed = open({ token: 'from-the-environment', file: write('tokens', 'old-token\nnew-token\n') });
    for (const token of ['from-the-environment', 'old-token', 'new-token']) expect(accepts(feed, token)).toBe(true);
    for (const token of ['other', 'old-token\nnew-token', '']) expect(accepts(feed, token)).toBe(false);
  });

  it('stops the start, naming the variable, when the file cannot be read or holds no token', () => {
    const missing = configErrorOf(() => open({ file: join(dir, 'nowhere') }));
    expect(missing.key).toBe('INVALIDATE_TOKEN_FILE');
    expect(missing.message).toContain('cannot read');
    const empty = configErrorOf(() => open({ file: write('empty', '\n  \n') }));
    expect(empty.key).toBe('INVALIDATE_TOKEN_FILE');
    expect(empty.message).toContain('holds no token');
    expect(configErrorOf(() => open({ file: dir })).message).toContain('cannot read');
  });

  it('rotates on a re-read: the new token in force, the one removed refused', async () => {
    const file = write('tokens', 'old-token\n');
    const feed = open({ file });
    writeFileSync(file, 'old-token\nnew-token\n');
    expect(await feed.reread()).toBe('replaced');
    expect([accepts(feed, 'old-token'), accepts(feed, 'new-token')]).toEqual([true, true]);
    writeFileSync(file, 'new-token\n');
    expect(await feed.reread()).toBe('replaced');
    expect([accepts(feed, 'old-token'), accepts(feed, 'new-token')]).toEqual([false, true]);
    expect(await feed.reread()).toBe('unchanged');
  });

  it('keeps the tokens in force, and warns, when a re-read finds the file gone or empty', async () => {
    const file = write('tokens', 'kept-token\n');
    const feed = open({ file, token: 'env-token' });
    rmSync(file);
    expect(await feed.reread()).toBe('kept');
    writeFileSync(file, '\n');
    expect(await feed.reread()).toBe('kept');
    expect([accepts(feed, 'kept-token'), accepts(feed, 'env-token')]).toEqual([true, true]);
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; reason: string; file: string });
    expect(warnings.map(({ level, reason, file: named }) => [level, reason, named])).toEqual([
      [40, 'ENOENT', file],
      [40, 'empty', file],
    ]);
  });

  it('is looked at every poll: a rewritten file is re-read without a signal', async () => {
    const file = write('tokens', 'old-token\n');
    const feed = open({ file, pollMs: 10 });
    const replaced = reread(feed, 'replaced');
    writeFileSync(file, 'old-token\nrotated-token-of-other-length\n');
    await replaced;
    expect(accepts(feed, 'rotated-token-of-other-length')).toBe(true);
  });

  it('follows a swapped symlink, as a Kubernetes secret volume swaps its data directory', async () => {
    for (const [version, token] of [
      ['v1', 'first-token'],
      ['v2', 'second-token'],
    ] as const) {
      mkdirSync(join(dir, version));
      writeFileSync(join(dir, version, 'tokens'), `${token}\n`);
    }
    symlinkSync('v1', join(dir, '..data'));
    symlinkSync(join('..data', 'tokens'), join(dir, 'tokens'));
    const feed = open({ file: join(dir, 'tokens'), pollMs: 10 });
    expect(accepts(feed, 'first-token')).toBe(true);
    const replaced = reread(feed, 'replaced');
    // The kubelet's swap: a new link renamed over the old one, in one step.
    symlinkSync('v2', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    await replaced;
    expect([accepts(feed, 'first-token'), accepts(feed, 'second-token')]).toEqual([false, true]);
  });

  it('never logs a token', async () => {
    const file = write('tokens', 'secret-feed-token-one\n');
    const feed = open({ file, token: 'secret-feed-token-env' });
    writeFileSync(file, 'secret-feed-token-two\n');
    await feed.reread();
    rmSync(file);
    await feed.reread();
    expect(lines.length).toBeGreaterThanOrEqual(2);
    expect(lines.join('\n')).not.toMatch(/secret-feed-token/);
  });
});
