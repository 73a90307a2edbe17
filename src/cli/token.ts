/**
 * `npm run -s token -- --company 1 --permissions view_slab,view_slab_logistics
 *   [--employee 7 --employee-permissions …] [--scope …] [--modules …] [--ttl seconds]`
 * Mints a development token signed with `JWT_SECRET`, or with the development secret that the
 * embedded default and the sandbox use when no key is set. Prints the token alone.
 */
import { parseArgs } from 'node:util';
import { mintDevToken } from '../dev/dev-credentials.js';

const USAGE =
  'usage: npm run -s token -- --company <id> [--permissions a,b] [--employee <id> --employee-permissions a,b]\n' +
  '       [--scope "operations:read"] [--modules slab,…] [--sub <id>] [--jti <id>] [--ttl <seconds>]\n' +
  '       [--issuer <iss>] [--audience <aud>]\n' +
  'Without --permissions the token holds every permission of the catalog. JWT_SECRET, when set, signs it.';

function list(value: string | undefined): string[] | undefined {
  return value?.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/** A digits-only id becomes a number, as issuers usually type it; anything else stays text. */
function identifier(value: string): string | number {
  return /^[1-9][0-9]{0,15}$/.test(value) && Number(value) <= Number.MAX_SAFE_INTEGER ? Number(value) : value;
}

async function run(): Promise<void> {
  const { values } = parseArgs({
    options: {
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
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (values.company === undefined) throw new Error('--company is required');
  const ttl = values.ttl === undefined ? undefined : Number(values.ttl);
  if (ttl !== undefined && (!Number.isInteger(ttl) || ttl <= 0)) throw new Error('--ttl must be a positive integer');
  const secret = process.env.JWT_SECRET;
  const permissions = list(values.permissions);
  const employeePermissions = list(values['employee-permissions']);
  const modules = list(values.modules);
  const token = await mintDevToken({
    company: identifier(values.company),
    ...(permissions !== undefined && { permissions }),
    ...(values.employee !== undefined && { employee: identifier(values.employee) }),
    ...(employeePermissions !== undefined && { employeePermissions }),
    ...(values.scope !== undefined && { scope: values.scope }),
    ...(modules !== undefined && { modules }),
    ...(values.sub !== undefined && { subject: values.sub }),
    ...(values.jti !== undefined && { tokenId: values.jti }),
    ...(ttl !== undefined && { ttlSeconds: ttl }),
    ...(values.issuer !== undefined && { issuer: values.issuer }),
    ...(values.audience !== undefined && { audience: values.audience }),
    ...(secret !== undefined && secret !== '' && { secret }),
  });
  process.stdout.write(`${token}\n`);
}

run().catch((error: unknown) => {
  process.stderr.write(`token: ${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
  process.exit(2);
});
