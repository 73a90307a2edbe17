/**
 * The permission matrix of seed §5 / docs/credentials.md for all thirteen resources, generated from the
 * catalog (`RESOURCES`), never written out a second time; the scope and module rules (defaults and
 * config overrides); and the precedence of docs/architecture.md#the-request-flow (401 → 404 → 405 → 403 → 400, OPTIONS aside).
 * Every refusal is the proxy's own (problem+json with a `code`) and never reaches the upstream.
 *
 * The matrix above is derived from the proxy's catalog, so it cannot tell a wrong catalog row from a
 * right one. The last suite asks the sandbox too, which implements seed §5 on its own
 * (`src/sandbox/resources.ts`, `src/sandbox/access.ts`): for every resource and every permission,
 * the proxy must refuse exactly what the system of record refuses, for the same reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL_PERMISSIONS, API_PREFIX, RESOURCES, type ResourceDef } from '../../src/catalog/resources.js';
import { SEED_RESOURCES } from '../../src/sandbox/resources.js';
import { startStack } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

type Stack = Awaited<ReturnType<typeof startStack>>;
type ReadKind = 'list' | 'record';

interface Problem {
  readonly status: number;
  readonly code: string;
  readonly request_id: string;
  readonly reason?: string;
  readonly missing?: readonly string[];
}

const KINDS: readonly ReadKind[] = ['list', 'record'];
const EMPLOYEE = 7;

function without(permission: string): string[] {
  return ALL_PERMISSIONS.filter((p) => p !== permission);
}

function problemOf(res: RawResponse): Problem {
  expect(res.headers['content-type']).toBe('application/problem+json');
  expect(res.headers['cache-control']).toBe('no-store');
  const body = res.json() as Problem;
  expect(body.status).toBe(res.status);
  expect(body.request_id).toBe(res.headers['x-request-id']);
  return body;
}

async function refused(stack: Stack, request: () => Promise<RawResponse>): Promise<RawResponse> {
  const before = stack.sandbox.stats().served;
  const res = await request();
  expect(stack.sandbox.stats().served).toBe(before);
  return res;
}

async function expectForbidden(
  stack: Stack,
  target: string,
  jwt: string,
  expected: { readonly reason: string; readonly missing?: readonly string[] },
): Promise<void> {
  const res = await refused(stack, () => getWithToken(stack.proxy.url, target, jwt));
  expect(res.status).toBe(403);
  const body = problemOf(res);
  expect(body.code).toBe('forbidden');
  expect(body.reason).toBe(expected.reason);
  if (expected.missing !== undefined) expect(body.missing).toEqual(expected.missing);
}

/** The list path, or the path of one of company 1's own records (so that a full token gets 200). */
function targetFor(stack: Stack, resource: ResourceDef, kind: ReadKind): string {
  if (kind === 'list') return `${API_PREFIX}/${resource.name}?per_page=2`;
  const record = stack.sandbox.dataset.get(resource.name)?.find((r) => String(r.company_id) === '1');
  if (record === undefined) throw new Error(`the sandbox has no ${resource.name} record for company 1`);
  return `${API_PREFIX}/${resource.name}/${record.id}`;
}

/** One row per (resource, read, required permission): generated from the catalog. */
const PERMISSION_CASES = RESOURCES.flatMap((resource) =>
  KINDS.flatMap((kind) =>
    resource.requiredPermissions.map((permission) => ({ resource, kind, permission, name: resource.name })),
  ),
);
const READ_CASES = RESOURCES.flatMap((resource) => KINDS.map((kind) => ({ resource, kind, name: resource.name })));

describe('the permission matrix, derived from the catalog', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('covers the thirteen resources, each needing view_slab plus its own permission', () => {
    expect(RESOURCES).toHaveLength(13);
    for (const resource of RESOURCES) {
      expect(resource.requiredPermissions[0]).toBe('view_slab');
      expect(resource.requiredPermissions).toContain(resource.permission);
    }
    expect(PERMISSION_CASES.length).toBeGreaterThan(READ_CASES.length);
  });

  it.each(READ_CASES)('$name $kind: a credential with every permission gets 200', async ({ resource, kind }) => {
    const res = await getWithToken(stack.proxy.url, targetFor(stack, resource, kind), await token());
    expect(res.status).toBe(200);
  });

  it.each(READ_CASES)(
    '$name $kind: a credential and an employee with every permission get 200',
    async ({ resource, kind }) => {
      const jwt = await token({ employee: EMPLOYEE, employeePermissions: ALL_PERMISSIONS });
      const res = await getWithToken(stack.proxy.url, targetFor(stack, resource, kind), jwt);
      expect(res.status).toBe(200);
    },
  );

  it.each(PERMISSION_CASES)(
    '$name $kind: a credential without $permission gets 403 permission',
    async ({ resource, kind, permission }) => {
      await expectForbidden(
        stack,
        targetFor(stack, resource, kind),
        await token({ permissions: without(permission) }),
        {
          reason: 'permission',
          missing: [permission],
        },
      );
    },
  );

  it.each(PERMISSION_CASES)(
    '$name $kind: an employee without $permission gets 403 employee',
    async ({ resource, kind, permission }) => {
      const jwt = await token({ employee: EMPLOYEE, employeePermissions: without(permission) });
      await expectForbidden(stack, targetFor(stack, resource, kind), jwt, {
        reason: 'employee',
        missing: [permission],
      });
    },
  );

  it.each(RESOURCES.map((resource) => ({ resource, name: resource.name })))(
    '$name: a credential without any permission is told every missing one, in catalog order',
    async ({ resource }) => {
      await expectForbidden(stack, targetFor(stack, resource, 'list'), await token({ permissions: [] }), {
        reason: 'permission',
        missing: resource.requiredPermissions,
      });
    },
  );

  it.each(RESOURCES.map((resource) => ({ resource, name: resource.name })))(
    '$name: only the permissions of this resource matter',
    async ({ resource }) => {
      const res = await getWithToken(
        stack.proxy.url,
        targetFor(stack, resource, 'list'),
        await token({ permissions: resource.requiredPermissions }),
      );
      expect(res.status).toBe(200);
    },
  );
});

describe('scope and module rules (defaults)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  const LIST_CASES = RESOURCES.map((resource) => ({ resource, name: resource.name }));

  it.each(LIST_CASES)('$name: no scope and no modules claim is allowed', async ({ resource }) => {
    const res = await getWithToken(stack.proxy.url, targetFor(stack, resource, 'list'), await token());
    expect(res.status).toBe(200);
  });

  it.each(LIST_CASES)(
    '$name: a scope that includes operations:read and modules that include slab are allowed',
    async ({ resource }) => {
      const res = await getWithToken(
        stack.proxy.url,
        targetFor(stack, resource, 'list'),
        await token({ scope: 'operations:read other', modules: ['crm', 'slab'] }),
      );
      expect(res.status).toBe(200);
    },
  );

  it.each(LIST_CASES)('$name: a scope without operations:read gets 403 scope', async ({ resource }) => {
    await expectForbidden(stack, targetFor(stack, resource, 'list'), await token({ scope: 'other' }), {
      reason: 'scope',
      missing: ['operations:read'],
    });
  });

  it.each(LIST_CASES)('$name: modules without slab get 403 module', async ({ resource }) => {
    await expectForbidden(stack, targetFor(stack, resource, 'list'), await token({ modules: ['crm'] }), {
      reason: 'module',
      missing: ['slab'],
    });
  });

  it('reads scope as whole space-separated words', async () => {
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    for (const scope of ['', 'operations:readwrite', 'operations:read-only', 'xoperations:read']) {
      await expectForbidden(stack, target, await token({ scope }), { reason: 'scope', missing: ['operations:read'] });
    }
    const spaced = await getWithToken(stack.proxy.url, target, await token({ scope: '  other   operations:read  ' }));
    expect(spaced.status).toBe(200);
  });

  it('treats an empty modules list as a plan without slab', async () => {
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    await expectForbidden(stack, target, await token({ modules: [] }), { reason: 'module', missing: ['slab'] });
  });

  it('applies the scope rule before the permission rule', async () => {
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    await expectForbidden(stack, target, await token({ scope: 'other', permissions: [] }), { reason: 'scope' });
  });
});

describe('scope and module rules (config overrides)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ config: { auth: { requiredScope: 'x:read', requiredModule: 'x-module' } } });
  });
  afterAll(() => stack.close());

  it('refuses the default scope when another one is required', async () => {
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    await expectForbidden(stack, target, await token({ scope: 'operations:read' }), {
      reason: 'scope',
      missing: ['x:read'],
    });
  });

  it('refuses the default module when another one is required', async () => {
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    await expectForbidden(stack, target, await token({ modules: ['slab'] }), {
      reason: 'module',
      missing: ['x-module'],
    });
  });

  it('accepts the configured scope and module', async () => {
    // The sandbox applies the default policy, so the token also carries the defaults for it.
    const target = targetFor(stack, RESOURCES[0] as ResourceDef, 'list');
    const res = await getWithToken(
      stack.proxy.url,
      target,
      await token({ scope: 'x:read operations:read', modules: ['x-module', 'slab'] }),
    );
    expect(res.status).toBe(200);
  });
});

describe('precedence under the API prefix (docs/architecture.md#the-request-flow)', () => {
  let stack: Stack;
  const known = `${API_PREFIX}/receipts`;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  function expectProblem(res: RawResponse, status: number, code: string): Problem {
    expect(res.status).toBe(status);
    const body = problemOf(res);
    expect(body.code).toBe(code);
    return body;
  }

  it.each([
    ['an unknown resource', 'GET', `${API_PREFIX}/no-such-resource`],
    ['a resource in the wrong case', 'GET', `${API_PREFIX}/Receipts`],
    ['a malformed id', 'GET', `${known}/abc`],
    ['a POST', 'POST', known],
    ['a DELETE of a record', 'DELETE', `${known}/1`],
    ['an invalid query parameter', 'GET', `${known}?per_page=abc`],
  ])('answers 401, not anything else, without a token: %s', async (_label, method, target) => {
    const res = await refused(stack, () => send(stack.proxy.url, target, { method }));
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
  });

  it.each([
    ['an unknown resource', `${API_PREFIX}/no-such-resource`],
    ['a resource in the wrong case', `${API_PREFIX}/Receipts`],
    ['a percent-encoded resource name', `${API_PREFIX}/receipt%73`],
    ['a malformed id', `${known}/abc`],
    ['id 0', `${known}/0`],
    ['an extra segment', `${known}/1/items`],
  ])('answers 404 not_found with a valid token: %s', async (_label, target) => {
    const res = await refused(stack, async () => getWithToken(stack.proxy.url, target, await token()));
    expectProblem(res, 404, 'not_found');
  });

  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])('answers 405 with Allow to %s with a valid token', async (method) => {
    const jwt = await token();
    const res = await refused(stack, () =>
      send(stack.proxy.url, known, {
        method,
        headers: [
          ['Authorization', `Bearer ${jwt}`],
          ['Content-Type', 'application/json'],
        ],
        body: '{}',
      }),
    );
    expectProblem(res, 405, 'method_not_allowed');
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
  });

  it('answers 404 before 403: an unknown resource with a token lacking permissions', async () => {
    const res = await refused(stack, async () =>
      getWithToken(stack.proxy.url, `${API_PREFIX}/no-such-resource`, await token({ permissions: [] })),
    );
    expectProblem(res, 404, 'not_found');
  });

  it('answers 405 before 403: a POST with a token lacking permissions', async () => {
    const jwt = await token({ permissions: [] });
    const res = await refused(stack, () =>
      send(stack.proxy.url, known, { method: 'POST', headers: [['Authorization', `Bearer ${jwt}`]] }),
    );
    expectProblem(res, 405, 'method_not_allowed');
  });

  it.each([
    ['a malformed per_page', `${known}?per_page=abc`, 'per_page'],
    ['an unknown parameter', `${known}?colour=red`, 'colour'],
    ['a repeated parameter', `${known}?per_page=2&per_page=3`, 'per_page'],
  ])('answers 403 before 400: %s with a token lacking a permission', async (_label, target, parameter) => {
    const lacking = await refused(stack, async () =>
      getWithToken(stack.proxy.url, target, await token({ permissions: without('view_slab_logistics') })),
    );
    const forbidden = expectProblem(lacking, 403, 'forbidden');
    expect(forbidden.reason).toBe('permission');
    expect(forbidden.missing).toEqual(['view_slab_logistics']);
    // The same request with every permission: the parameter really is invalid.
    const full = await refused(stack, async () => getWithToken(stack.proxy.url, target, await token()));
    expectProblem(full, 400, 'invalid_parameter');
    expect((full.json() as { parameter?: string }).parameter).toBe(parameter);
  });

  it.each([
    ['a list', known],
    ['a record', `${known}/1`],
  ])('answers OPTIONS on %s with 204 and Allow, without a token', async (_label, target) => {
    const res = await refused(stack, () => send(stack.proxy.url, target, { method: 'OPTIONS' }));
    expect(res.status).toBe(204);
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    expect(res.body.length).toBe(0);
  });

  it('serves HEAD like GET, without a body', async () => {
    const res = await getWithToken(stack.proxy.url, `${known}?per_page=2`, await token(), { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(0);
  });
});

describe('the proxy refuses exactly what the system of record refuses (seed §5, judged by the sandbox)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  /** Every permission either side names: a permission only one of them knows is tested all the same. */
  const UNIVERSE = [...new Set([...ALL_PERMISSIONS, ...SEED_RESOURCES.flatMap((r) => r.permissions)])];
  const everyOtherThan = (permission: string) => UNIVERSE.filter((p) => p !== permission);
  const VARIANTS: ReadonlyArray<readonly [label: string, claims: Parameters<typeof token>[0]]> = [
    ['every permission', { permissions: UNIVERSE }],
    ['no permission', { permissions: [] }],
    ...UNIVERSE.map((p) => [`a credential without ${p}`, { permissions: everyOtherThan(p) }] as const),
    ['an employee with every permission', { permissions: UNIVERSE, employee: EMPLOYEE, employeePermissions: UNIVERSE }],
    ...UNIVERSE.map(
      (p) =>
        [
          `an employee without ${p}`,
          { permissions: UNIVERSE, employee: EMPLOYEE, employeePermissions: everyOtherThan(p) },
        ] as const,
    ),
    ['scope operations:read', { permissions: UNIVERSE, scope: 'operations:read' }],
    ['scope without operations:read', { permissions: UNIVERSE, scope: 'operations:write' }],
    ['modules with slab', { permissions: UNIVERSE, modules: ['slab'] }],
    ['modules without slab', { permissions: UNIVERSE, modules: ['crm'] }],
  ];

  it.each(SEED_RESOURCES.map((resource) => ({ name: resource.name })))(
    '$name, list and record: same status as the sandbox asked directly, and the same reason and missing permissions',
    async ({ name }) => {
      const resource = RESOURCES.find((r) => r.name === name);
      if (resource === undefined) throw new Error(`the proxy's catalog has no ${name}`);
      const disagreements: string[] = [];
      for (const kind of KINDS) {
        const target = targetFor(stack, resource, kind);
        for (const [label, claims] of VARIANTS) {
          const jwt = await token(claims);
          const [proxy, direct] = await Promise.all([
            getWithToken(stack.proxy.url, target, jwt),
            getWithToken(stack.sandbox.url, target, jwt),
          ]);
          const theirs = direct.status === 403 ? (direct.json() as { reason?: string; missing?: string[] }) : {};
          const ours = proxy.status === 403 ? (proxy.json() as Problem) : {};
          const said = (status: number, body: { reason?: string; missing?: readonly string[] }) =>
            status === 403 ? `403 ${body.reason ?? '?'} [${(body.missing ?? []).join(', ')}]` : String(status);
          const sandboxSaid = said(direct.status, theirs);
          const proxySaid = said(proxy.status, ours);
          if (proxySaid !== sandboxSaid)
            disagreements.push(`${kind} ${target}, ${label}: proxy ${proxySaid}, sandbox ${sandboxSaid}`);
          else if (proxy.status === 200 && !proxy.body.equals(direct.body))
            disagreements.push(`${kind} ${target}, ${label}: different 200 bodies`);
        }
      }
      expect(disagreements).toEqual([]);
    },
  );
});
