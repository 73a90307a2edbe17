/**
 * `npm run -s token -- --company 1 --permissions view_slab,view_slab_logistics
 *   [--employee 7 --employee-permissions …] [--scope …] [--modules …] [--ttl seconds]`
 * Mints a development token signed with `JWT_SECRET`, or with the development secret that the
 * embedded default and the sandbox use when no key is set. Prints the token alone.
 *
 * It mints only what the proxy would accept: ids in the claim grammar (a digits-only id is the
 * positive integer it spells, so `0` and `007` are refused rather than minted as text), permissions
 * the catalog knows (`--allow-unknown-permissions` mints others on purpose), and every claim checked
 * by the proxy's own claim reader before the token is printed.
 */

import { parseArgs } from 'node:util';
import { decodeJwt } from 'jose';
import { ClaimError, DEFAULT_CLAIM_NAMES, isTenantText, principalFromClaims } from '../auth/claims.js';
import { isPositiveId } from '../catalog/grammar.js';
import { ALL_PERMISSIONS } from '../catalog/resources.js';
import { messageOf } from '../errors/proxy-error.js';
import { type Command, exitWithUsage, parseCommandLine, STANDARD_OPTIONS } from './command-line.js';
import { mintDevToken } from './dev-credentials.js';

const TOKEN_COMMAND: Command = {
  name: 'slab-ops-proxy token',
  usage: [
    'usage: npm run -s token -- --company <id> [--permissions a,b] [--employee <id> --employee-permissions a,b]',
    '       [--scope "operations:read"] [--modules slab,…] [--sub <id>] [--jti <id>] [--ttl <seconds>]',
    '       [--issuer <iss>] [--audience <aud>] [--allow-unknown-permissions] [--help] [--version]',
    'A company or employee id is a positive integer (1 to 2^53-1, no leading zeros) or 1-64 characters of',
    'A-Z a-z 0-9 _ - (not digits alone). Without --permissions the token holds every permission the',
    "catalog knows; others need --allow-unknown-permissions. The catalog's permissions:",
    `  ${ALL_PERMISSIONS.join(', ')}`,
    'JWT_SECRET, when set, signs the token; otherwise the development secret does.',
  ].join('\n'),
};

const KNOWN_PERMISSIONS: ReadonlySet<string> = new Set(ALL_PERMISSIONS);

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A company or employee id: the number a digits-only value spells, or text in the claim grammar. */
function identifier(flag: string, value: string): string | number {
  if (/^[0-9]+$/.test(value)) {
    if (isPositiveId(value)) return Number(value);
    exitWithUsage(
      TOKEN_COMMAND,
      `${flag} ${value}: a numeric id must be a positive integer from 1 to 2^53-1 without leading zeros`,
    );
  }
  if (isTenantText(value)) return value;
  exitWithUsage(TOKEN_COMMAND, `${flag} must be a positive integer or 1-64 characters of A-Z a-z 0-9 _ -`);
}

function permissions(flag: string, value: string | undefined, allowUnknown: boolean): string[] | undefined {
  const names = list(value);
  const unknown = names?.filter((name) => !KNOWN_PERMISSIONS.has(name)) ?? [];
  if (unknown.length > 0 && !allowUnknown) {
    exitWithUsage(
      TOKEN_COMMAND,
      `${flag}: not a permission the catalog knows: ${unknown.join(', ')} (--allow-unknown-permissions mints it anyway)`,
    );
  }
  return names;
}

async function run(): Promise<void> {
  const { values } = parseCommandLine(TOKEN_COMMAND, (args) =>
    parseArgs({
      args,
      options: {
        ...STANDARD_OPTIONS,
        company: { type: 'string' },
        permissions: { type: 'string' },
        employee: { type: 'string' },
        'employee-permissions': { type: 'string' },
        scope: { type: 'string' },
        modules: { type: 'string' },
        sub: { type: 'string' },
        jti: { type: 'string' },
        ttl: { type: 'string' },
        issuer: { type: 'string' },
        audience: { type: 'string' },
        'allow-unknown-permissions': { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }),
  );
  if (values.company === undefined) exitWithUsage(TOKEN_COMMAND, '--company is required');
  const company = identifier('--company', values.company);
  const employee = values.employee === undefined ? undefined : identifier('--employee', values.employee);
  if (values['employee-permissions'] !== undefined && employee === undefined)
    exitWithUsage(TOKEN_COMMAND, '--employee-permissions needs --employee');
  const allowUnknown = values['allow-unknown-permissions'] === true;
  const held = permissions('--permissions', values.permissions, allowUnknown);
  const employeeHeld = permissions('--employee-permissions', values['employee-permissions'], allowUnknown);
  if (values.ttl !== undefined && !/^[1-9][0-9]{0,8}$/.test(values.ttl))
    exitWithUsage(TOKEN_COMMAND, '--ttl must be a whole number of seconds from 1 to 999999999');
  const modules = list(values.modules);
  const secret = process.env.JWT_SECRET;
  const token = await mintDevToken({
    company,
    ...(held !== undefined && { permissions: held }),
    ...(employee !== undefined && { employee }),
    ...(employeeHeld !== undefined && { employeePermissions: employeeHeld }),
    ...(values.scope !== undefined && { scope: values.scope }),
    ...(modules !== undefined && { modules }),
    ...(values.sub !== undefined && { subject: values.sub }),
    ...(values.jti !== undefined && { tokenId: values.jti }),
    ...(values.ttl !== undefined && { ttlSeconds: Number(values.ttl) }),
    ...(values.issuer !== undefined && { issuer: values.issuer }),
    ...(values.audience !== undefined && { audience: values.audience }),
    ...(secret !== undefined && secret !== '' && { secret }),
  });
  // The proxy's own claim reader: a token it would refuse (an empty --sub, a permission name too
  // long for the claim) is not printed.
  try {
    principalFromClaims(decodeJwt(token), DEFAULT_CLAIM_NAMES, 'check');
  } catch (error) {
    if (error instanceof ClaimError)
      exitWithUsage(TOKEN_COMMAND, `the proxy would refuse this token: its ${error.claim} claim is not valid`);
    throw error;
  }
  process.stdout.write(`${token}\n`);
}

run().catch((error: unknown) => {
  exitWithUsage(TOKEN_COMMAND, messageOf(error));
});
