/**
 * Pure tests of claim validation (src/auth/claims.ts) and of reading the bearer header
 * (src/auth/bearer.ts): the rules that the HTTP suites exercise one request at a time.
 */
import type { JWTPayload } from 'jose';
import { describe, expect, it } from 'vitest';
import { readBearer } from '../../src/auth/bearer.js';
import { ClaimError, type ClaimNames, DEFAULT_CLAIM_NAMES, principalFromClaims } from '../../src/auth/claims.js';

const HASH = 'digest-of-the-token';

function payload(overrides: Record<string, unknown> = {}): JWTPayload {
  return { company_id: 1, permissions: ['view_slab'], exp: 2_000_000_000, ...overrides };
}

function claimErrorOf(claims: JWTPayload, names: ClaimNames = DEFAULT_CLAIM_NAMES): ClaimError {
  try {
    principalFromClaims(claims, names, HASH);
  } catch (error) {
    expect(error).toBeInstanceOf(ClaimError);
    if (error instanceof ClaimError) return error;
  }
  throw new Error('the claims were accepted');
}

describe('principalFromClaims', () => {
  it.each<[string, unknown, string]>([
    ['the number 1', 1, '1'],
    ['the string "1"', '1', '1'],
    ['the largest safe integer', Number.MAX_SAFE_INTEGER, String(Number.MAX_SAFE_INTEGER)],
    ['text with - and _', 'acme_co-7', 'acme_co-7'],
    ['64 characters', 'z'.repeat(64), 'z'.repeat(64)],
    ['"07", kept as its own string', '07', '07'],
  ])('reads company_id %s as %s', (_label, company, canonical) => {
    expect(principalFromClaims(payload({ company_id: company }), DEFAULT_CLAIM_NAMES, HASH).company).toBe(canonical);
  });

  it.each<[string, unknown]>([
    ['1.5', 1.5],
    ['0', 0],
    ['-3', -3],
    ['2^53', 2 ** 53],
    ['NaN-like text', 'NaN '],
    ['true', true],
    ['[]', []],
    ['{}', {}],
    ['null', null],
    ['"a b"', 'a b'],
    ['""', ''],
    ['65 characters', 'a'.repeat(65)],
    ['a slash', 'a/b'],
    ['missing', undefined],
  ])('refuses company_id %s', (_label, company) => {
    expect(claimErrorOf(payload({ company_id: company })).claim).toBe('company_id');
  });

  it.each<[string, unknown]>([
    ['a string', 'view_slab'],
    ['a list with a number', ['view_slab', 1]],
    ['a list with an empty string', ['view_slab', '']],
    ['a list with a 129-character string', ['view_slab', 'p'.repeat(129)]],
    ['a list of 257 items', Array.from({ length: 257 }, (_, i) => `p${i}`)],
    ['missing', undefined],
  ])('refuses permissions as %s', (_label, permissions) => {
    expect(claimErrorOf(payload({ permissions })).claim).toBe('permissions');
  });

  it('requires employee_permissions when employee_id is present', () => {
    expect(claimErrorOf(payload({ employee_id: 7 })).claim).toBe('employee_permissions');
    expect(claimErrorOf(payload({ employee_id: 7, employee_permissions: 'view_slab' })).claim).toBe(
      'employee_permissions',
    );
    expect(claimErrorOf(payload({ employee_id: 0, employee_permissions: [] })).claim).toBe('employee_id');
  });

  it('reads an employee and its permissions', () => {
    const principal = principalFromClaims(
      payload({ employee_id: '7', employee_permissions: ['view_slab'] }),
      DEFAULT_CLAIM_NAMES,
      HASH,
    );
    expect(principal.employee?.id).toBe('7');
    expect([...(principal.employee?.permissions ?? [])]).toEqual(['view_slab']);
  });

  it('reads no employee when employee_id is absent, whatever employee_permissions says', () => {
    expect(
      principalFromClaims(payload({ employee_permissions: 'junk' }), DEFAULT_CLAIM_NAMES, HASH).employee,
    ).toBeUndefined();
  });

  it('reads scope and modules as space-separated text or as a list, and leaves them undefined when absent', () => {
    const fromText = principalFromClaims(payload({ scope: ' a  operations:read ' }), DEFAULT_CLAIM_NAMES, HASH).scope;
    expect([...(fromText ?? [])].sort()).toEqual(['a', 'operations:read']);
    const fromList = principalFromClaims(payload({ scope: ['operations:read'] }), DEFAULT_CLAIM_NAMES, HASH).scope;
    expect([...(fromList ?? [])]).toEqual(['operations:read']);
    expect(principalFromClaims(payload(), DEFAULT_CLAIM_NAMES, HASH).scope).toBeUndefined();
    expect(principalFromClaims(payload(), DEFAULT_CLAIM_NAMES, HASH).modules).toBeUndefined();
    expect(claimErrorOf(payload({ scope: 42 })).claim).toBe('scope');
    const modulesFromText = principalFromClaims(payload({ modules: 'crm slab' }), DEFAULT_CLAIM_NAMES, HASH).modules;
    expect([...(modulesFromText ?? [])].sort()).toEqual(['crm', 'slab']);
    expect(claimErrorOf(payload({ modules: ['slab', 3] })).claim).toBe('modules');
  });

  it('names the credential by sub, else jti, else the token digest', () => {
    expect(principalFromClaims(payload({ sub: 's', jti: 'j' }), DEFAULT_CLAIM_NAMES, HASH).credential).toBe('sub:s');
    expect(principalFromClaims(payload({ jti: 'j' }), DEFAULT_CLAIM_NAMES, HASH).credential).toBe('jti:j');
    expect(principalFromClaims(payload(), DEFAULT_CLAIM_NAMES, HASH).credential).toBe(`tok:${HASH}`);
  });

  it('refuses a sub or jti that is not short non-empty text', () => {
    expect(claimErrorOf(payload({ sub: 12 })).claim).toBe('sub');
    expect(claimErrorOf(payload({ sub: '' })).claim).toBe('sub');
    expect(claimErrorOf(payload({ jti: 'j'.repeat(257) })).claim).toBe('jti');
  });

  it('requires a numeric exp', () => {
    expect(claimErrorOf(payload({ exp: undefined })).claim).toBe('exp');
    expect(claimErrorOf(payload({ exp: '2000000000' })).claim).toBe('exp');
  });

  it('follows configured claim names', () => {
    const names: ClaimNames = { ...DEFAULT_CLAIM_NAMES, company: 'tenant', permissions: 'perms' };
    const principal = principalFromClaims({ tenant: 'acme', perms: ['view_slab'], exp: 2_000_000_000 }, names, HASH);
    expect(principal.company).toBe('acme');
    expect(claimErrorOf({ company_id: 1, permissions: ['view_slab'], exp: 2_000_000_000 }, names).claim).toBe('tenant');
  });
});

describe('readBearer', () => {
  it('reads the token after the scheme, in any case, with one or more spaces', () => {
    expect(readBearer(['Bearer abc.def.ghi'])).toEqual({ kind: 'token', token: 'abc.def.ghi' });
    expect(readBearer(['bearer abc.def.ghi'])).toEqual({ kind: 'token', token: 'abc.def.ghi' });
    expect(readBearer(['BEARER   abc.def.ghi'])).toEqual({ kind: 'token', token: 'abc.def.ghi' });
  });

  it('reports a missing header', () => {
    expect(readBearer(undefined)).toEqual({ kind: 'missing' });
    expect(readBearer([])).toEqual({ kind: 'missing' });
  });

  it('reports two headers as duplicate, whatever they hold', () => {
    expect(readBearer(['Bearer a.b.c', 'Bearer a.b.c'])).toEqual({ kind: 'duplicate' });
    expect(readBearer(['Bearer a.b.c', ''])).toEqual({ kind: 'duplicate' });
  });

  it.each(['Bearer', 'Bearer ', 'Bearer a b', 'Bearer a=b', 'Bearer a.b=.c', 'Bearer\tabc'])(
    'reports %j as malformed',
    (value) => {
      expect(readBearer([value])).toEqual({ kind: 'malformed' });
    },
  );
});
