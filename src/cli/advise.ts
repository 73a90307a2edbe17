/**
 * `npm run advise -- [--admin http://host:9090] [--token …] [--target seconds]`: asks a replica's
 * operator API for its freshness advice (`GET /admin/cache/freshness`,
 * docs/cache.md#freshness-advice) and prints it as a table (advice-table.ts). The token is
 * `ADMIN_TOKEN` unless `--token` names one; it is sent, and never printed. An answer other than the
 * advice (the API refused, or could not be reached) is named on stderr with exit code 1; a bad
 * command line prints the usage, exit code 2.
 */
import { parseArgs } from 'node:util';
import { messageOf } from '../errors/proxy-error.js';
import { adviceTable, freshnessAnswer } from './advice-table.js';
import { type Command, exitWithUsage, parseCommandLine, STANDARD_OPTIONS } from './command-line.js';

const ADVISE_COMMAND: Command = {
  name: 'slab-ops-proxy advise',
  usage: [
    'usage: npm run -s advise -- [--admin <url>] [--token <admin token>] [--target <seconds>] [--help] [--version]',
    "Prints a replica's freshness advice per resource: its TTL, how often its pages change, the share of",
    'refreshes that found them unchanged, refreshes and upstream kilobytes (1000 bytes) per minute, the',
    'estimated share of reads served stale now (missing a change older than 1 s, stale-while-revalidate',
    'and the wait for a read past the TTL counted), and the TTL that keeps the expected staleness of a',
    'read within the target (default 5 s). --admin is the admin port (default http://127.0.0.1:9090);',
    'the token is ADMIN_TOKEN unless --token is given.',
  ].join('\n'),
};
/** How long the operator API has to answer, ms. */
const ANSWER_TIMEOUT_MS = 10_000;

/** Stops with `message` on stderr, exit code 1: the advice could not be had. */
function fail(message: string): never {
  process.stderr.write(`${ADVISE_COMMAND.name}: ${message}\n`);
  process.exit(1);
}

/** The admin port's base URL, without credentials or a path of its own: what is shown is that. */
function adminOrigin(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    exitWithUsage(ADVISE_COMMAND, `--admin ${text}: not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') exitWithUsage(ADVISE_COMMAND, '--admin: http or https');
  return new URL(url.origin);
}

/** What a refusal says: its status and the problem's code and detail, when it is a problem+json. */
async function refusal(res: Response): Promise<string> {
  let problem: unknown;
  try {
    problem = await res.json();
  } catch {
    problem = undefined;
  }
  const described = typeof problem === 'object' && problem !== null ? problem : {};
  const code = 'code' in described && typeof described.code === 'string' ? ` ${described.code}` : '';
  const detail = 'detail' in described && typeof described.detail === 'string' ? `: ${described.detail}` : '';
  return `the operator API answered ${String(res.status)}${code}${detail}`;
}

async function run(): Promise<void> {
  const { values } = parseCommandLine(ADVISE_COMMAND, (args) =>
    parseArgs({
      args,
      options: {
        ...STANDARD_OPTIONS,
        admin: { type: 'string' },
        token: { type: 'string' },
        target: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }),
  );
  const origin = adminOrigin(values.admin ?? 'http://127.0.0.1:9090');
  const token = values.token ?? process.env.ADMIN_TOKEN;
  if (token === undefined || token === '') exitWithUsage(ADVISE_COMMAND, 'no admin token: set ADMIN_TOKEN or --token');
  const url = new URL('/admin/cache/freshness', origin);
  if (values.target !== undefined) url.searchParams.set('target', values.target);
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
    });
  } catch (error) {
    // Node's fetch names the reason in its cause (ECONNREFUSED, a timeout); neither holds the token.
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    fail(`cannot reach ${origin.origin}: ${messageOf(cause)}`);
  }
  if (res.status !== 200) fail(await refusal(res));
  const parsed = freshnessAnswer.safeParse(await res.json().catch(() => undefined));
  if (!parsed.success) fail(`${origin.origin} did not answer with freshness advice`);
  process.stdout.write(adviceTable(parsed.data, origin.origin));
}

run().catch((error: unknown) => {
  fail(messageOf(error));
});
