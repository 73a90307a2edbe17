/**
 * `npm run sandbox`: the sandbox system of record as its own process, for local development, the
 * load test and the benchmarks. Settings: SANDBOX_PORT (8081), SANDBOX_HOST (127.0.0.1),
 * SANDBOX_RATE_LIMIT (requests per second before 429; 0 turns it off; default 1000),
 * SANDBOX_CONTROL (1: the test-only fault switch and counters under /__sandbox/), SANDBOX_SEED,
 * SANDBOX_VALIDATORS (`etag,last-modified`, `etag`, `last-modified` or `none`), SANDBOX_LIVE (live
 * mode from the start: a preset, `mixed`, `append` or `move`, or the rules as JSON;
 * docs/sandbox.md#live-mode), SANDBOX_LIVE_WEBHOOK and SANDBOX_LIVE_WEBHOOK_TOKEN (where live mode
 * sends its changes, and the token: the proxy's INVALIDATE_TOKEN when unset), and the proxy's own
 * key variables (JWT_SECRET, JWT_PUBLIC_KEY(_FILE), JWT_JWKS_URL, JWT_ISSUER,
 * JWT_AUDIENCE; the development secret when none is set).
 */

import { parseArgs } from 'node:util';
import { type Command, parseCommandLine, STANDARD_OPTIONS, USAGE_EXIT_CODE } from '../cli/command-line.js';
import { DEV_SECRET, mintDevToken } from '../cli/dev-credentials.js';
import { ConfigError, type EnvConfig, loadEnv } from '../config/load.js';
import { messageOf } from '../errors/proxy-error.js';
import type { WebhookTarget } from './change-webhook.js';
import type { SandboxKeys } from './credentials.js';
import { type ChangeRule, isLivePreset, LiveRuleError, parseLiveRules } from './live-rules.js';
import { SEED_RESOURCES } from './resources.js';
import { createSandbox } from './server.js';
import { ALL_VALIDATORS, type ValidatorSettings, validatorsFromText } from './validators.js';

function validatorsVar(): ValidatorSettings {
  const text = process.env.SANDBOX_VALIDATORS;
  if (text === undefined || text === '') return ALL_VALIDATORS;
  const settings = validatorsFromText(text);
  if (settings === undefined) throw new ConfigError('SANDBOX_VALIDATORS', 'must be etag, last-modified, both or none');
  return settings;
}

/** `SANDBOX_LIVE`: a preset's name (`mixed`, `append`, `move`), or `{"rules": [...]}` as JSON; unset: off. */
function liveVar(): readonly ChangeRule[] | undefined {
  const text = process.env.SANDBOX_LIVE;
  if (text === undefined || text === '') return undefined;
  try {
    const body: unknown = isLivePreset(text.trim()) ? { preset: text.trim() } : JSON.parse(text);
    return parseLiveRules(
      body,
      SEED_RESOURCES.map((resource) => resource.name),
    );
  } catch (error) {
    throw new ConfigError(
      'SANDBOX_LIVE',
      error instanceof LiveRuleError ? error.message : 'must be mixed, append, move or JSON rules',
    );
  }
}

/**
 * `SANDBOX_LIVE_WEBHOOK` and `SANDBOX_LIVE_WEBHOOK_TOKEN`: where live mode sends its changes, and
 * the token it sends; without one, the proxy's `INVALIDATE_TOKEN` (the token that may only
 * invalidate), never its `ADMIN_TOKEN` unless named. A body the proxy refuses for good is logged.
 */
function webhookVar(env: EnvConfig): WebhookTarget | undefined {
  const url = process.env.SANDBOX_LIVE_WEBHOOK;
  if (url === undefined || url === '') return undefined;
  if (!/^https?:\/\//.test(url) || !URL.canParse(url))
    throw new ConfigError('SANDBOX_LIVE_WEBHOOK', 'must be an http(s) URL');
  const named = process.env.SANDBOX_LIVE_WEBHOOK_TOKEN;
  const token = named === undefined || named === '' ? env.invalidateToken : named;
  if (token === undefined)
    throw new ConfigError(
      'SANDBOX_LIVE_WEBHOOK_TOKEN',
      "is needed with SANDBOX_LIVE_WEBHOOK (the proxy's INVALIDATE_TOKEN or ADMIN_TOKEN), or set INVALIDATE_TOKEN",
    );
  const onGiveUp = (failure: string, changes: number): void => {
    process.stderr.write(`sandbox: webhook gave up on ${String(changes)} changes (${failure})\n`);
  };
  return { url, token, onGiveUp };
}

function integerVar(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  if (!/^[0-9]{1,9}$/.test(text)) throw new ConfigError(name, 'must be a non-negative integer');
  return Number(text);
}

const SANDBOX_COMMAND: Command = {
  name: 'slab-ops-proxy sandbox',
  usage: [
    'usage: node dist/sandbox/main.js [--help] [--version]      (npm run sandbox builds, then runs this)',
    '',
    'Runs the sandbox system of record (docs/sandbox.md). It takes no',
    'arguments; the environment sets everything:',
    '  SANDBOX_PORT (8081), SANDBOX_HOST (127.0.0.1)   where it listens',
    '  SANDBOX_RATE_LIMIT (1000)                       requests per second before its own 429; 0: off',
    '  SANDBOX_CONTROL                                 1: the test-only control API under /__sandbox/',
    '  SANDBOX_SEED (20261122)                         the data seed',
    '  SANDBOX_VALIDATORS (etag,last-modified)         validators sent and conditional requests answered 304:',
    '                                                  etag, last-modified, both (comma-separated) or none',
    '  SANDBOX_LIVE                                    live mode from the start: mixed, append, move, or {"rules": [...]} as JSON',
    "  SANDBOX_LIVE_WEBHOOK, SANDBOX_LIVE_WEBHOOK_TOKEN each change POSTed there with the token (the proxy's",
    '                                                  /admin/cache/invalidate and its INVALIDATE_TOKEN or',
    '                                                  ADMIN_TOKEN; unset: INVALIDATE_TOKEN), sent again on',
    '                                                  429, 5xx or no answer, with backoff',
    '  JWT_JWKS_URL | JWT_PUBLIC_KEY | JWT_PUBLIC_KEY_FILE | JWT_SECRET, JWT_ALGORITHMS, JWT_ISSUER, JWT_AUDIENCE',
    '                                                  token keys as the proxy reads them; none: the development secret',
  ].join('\n'),
};

async function run(): Promise<void> {
  parseCommandLine(SANDBOX_COMMAND, (args) =>
    parseArgs({ args, options: STANDARD_OPTIONS, strict: true, allowPositionals: false }),
  );
  const env = loadEnv(process.env);
  const keys: SandboxKeys =
    env.keySource === undefined
      ? { kind: 'secret', secret: DEV_SECRET }
      : { ...env.keySource, ...(env.jwtAlgorithms !== undefined && { algorithms: env.jwtAlgorithms }) };
  const port = integerVar('SANDBOX_PORT', 8081);
  if (port > 65_535) throw new ConfigError('SANDBOX_PORT', 'must be a port number');
  const live = liveVar();
  const webhook = webhookVar(env);
  const sandbox = createSandbox({
    keys,
    ...(env.jwtIssuer !== undefined && { issuer: env.jwtIssuer }),
    ...(env.jwtAudience !== undefined && { audience: env.jwtAudience }),
    rateLimitPerSecond: integerVar('SANDBOX_RATE_LIMIT', 1000),
    control: process.env.SANDBOX_CONTROL === '1' || process.env.SANDBOX_CONTROL === 'true',
    seed: integerVar('SANDBOX_SEED', 20_261_122),
    validators: validatorsVar(),
    ...(live !== undefined && { live }),
    ...(webhook !== undefined && { webhook }),
  });
  const url = await sandbox.listen(port, process.env.SANDBOX_HOST ?? '127.0.0.1');
  const lines = [`sandbox system of record listening on ${url}`];
  if (keys.kind === 'secret' && env.keySource === undefined) {
    lines.push(`development token (company 1, every permission): ${await mintDevToken({ company: 1 })}`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const stop = (): void => {
    void sandbox.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

run().catch((error: unknown) => {
  process.stderr.write(`sandbox: ${messageOf(error)}\n`);
  process.exit(USAGE_EXIT_CODE);
});
