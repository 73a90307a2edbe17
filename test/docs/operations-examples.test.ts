/**
 * The operator examples of docs/operations.md, run as written: each `curl` line of the
 * block there is run by `sh` against a real proxy on a real Redis, and its output must be what the
 * `#` lines under it say (`…` stands for anything). An example that drifts from the product fails
 * here.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const run = promisify(execFile);
const ADMIN_TOKEN = 'the readme examples admin token';
/** The page that holds the examples. */
const EXAMPLES_DOC = 'docs/operations.md';
const EXAMPLES_INTRO = 'The examples below are run by a test';

interface Example {
  readonly command: string;
  readonly expected: string;
}

/** The block after "The examples below are run by a test": its first line sets the variables. */
function examples(): { setup: string; list: Example[] } {
  const page = readFileSync(EXAMPLES_DOC, 'utf8');
  const intro = page.indexOf(EXAMPLES_INTRO);
  if (intro === -1) throw new Error(`${EXAMPLES_DOC} no longer says "${EXAMPLES_INTRO}"`);
  const from = page.indexOf('```sh\n', intro);
  const block = page.slice(from + '```sh\n'.length, page.indexOf('\n```', from + 6)).split('\n');
  const [setup = '', ...lines] = block;
  const list: Example[] = [];
  for (const line of lines) {
    if (line.startsWith('curl ')) list.push({ command: line, expected: '' });
    else if (line.startsWith('# ') && list.length > 0) {
      const last = list.pop() as Example;
      list.push({
        command: last.command,
        expected: last.expected === '' ? line.slice(2) : `${last.expected}\n${line.slice(2)}`,
      });
    } else throw new Error(`a line the test does not know how to run: ${line}`);
  }
  return { setup, list };
}

function matches(actual: string, expected: string): boolean {
  const pattern = expected
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*?');
  return new RegExp(`^${pattern}$`, 's').test(actual);
}

let redis: RedisServer;
let sandbox: Sandbox;
let proxy: ProxyHandle;

beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
  sandbox = await startSandbox();
  proxy = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, adminToken: ADMIN_TOKEN });
  // What the metrics example shows: one miss on receipts, then hits.
  const reader = await token();
  for (let i = 0; i < 3; i++)
    expect((await getWithToken(proxy.url, `${API_PREFIX}/receipts?per_page=2`, reader)).status).toBe(200);
});

afterAll(async () => {
  await proxy?.close();
  await sandbox?.close();
  await redis?.stop();
});

describe('the operator examples of docs/operations.md', () => {
  const { setup, list } = examples();

  it('are there to run', () => {
    expect(setup).toContain('ADMIN=http://127.0.0.1:9090');
    expect(list.length).toBeGreaterThanOrEqual(15);
  });

  // In order: later examples read what earlier ones changed.
  it('each print what the page says they print', async () => {
    const adminSetup = setup.replace('http://127.0.0.1:9090', proxy.adminUrl ?? '');
    for (const example of list) {
      const { stdout } = await run('sh', ['-c', `${adminSetup}; ${example.command}`], {
        env: { PATH: process.env.PATH ?? '', ADMIN_TOKEN },
      });
      const actual = stdout.replace(/\n$/, '');
      expect(
        matches(actual, example.expected),
        `${example.command}\n  printed: ${actual}\n  docs:    ${example.expected}`,
      ).toBe(true);
    }
  });
});
