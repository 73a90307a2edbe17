/**
 * The canonicalisation table (docs/clients.md#request-rules and docs/architecture.md#cache-poisoning): every accepted form and what
 * it becomes, every refused form and the parameter it is refused for.
 */
import { describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { InvalidParameterError, ProxyError } from '../../src/errors/proxy-error.js';
import type { CanonicalRead } from '../../src/request/canonical-read.js';
import { classifyTarget } from '../../src/request/target.js';
import { REFUSED_PARAMETERS, REFUSED_REQUESTS } from '../fixtures/validation-cases.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';

const P = API_PREFIX;

function read(url: string): CanonicalRead {
  const result = canonicaliseTarget(url);
  if (result instanceof ProxyError) throw new Error(`expected a read for ${url}, got ${result.code}`);
  return result;
}

function refusal(url: string): ProxyError {
  const result = canonicaliseTarget(url);
  if (!(result instanceof ProxyError)) throw new Error(`expected an error for ${url}, got ${result.upstreamTarget}`);
  return result;
}

describe('accepted requests and their canonical form', () => {
  it.each([
    [`${P}/receipts`, `${P}/receipts?per_page=30`],
    [`${P}/receipts?`, `${P}/receipts?per_page=30`],
    [`${P}/receipts?per_page=30`, `${P}/receipts?per_page=30`],
    [`${P}/receipts?per_page=%33%30`, `${P}/receipts?per_page=30`],
    [`${P}/receipts?per_%70age=30`, `${P}/receipts?per_page=30`],
    [`${P}/receipts?per_page=1`, `${P}/receipts?per_page=1`],
    [`${P}/receipts?per_page=100`, `${P}/receipts?per_page=100`],
    [`${P}/receipts?warehouse_id=7&shipment_id=3`, `${P}/receipts?per_page=30&shipment_id=3&warehouse_id=7`],
    [`${P}/receipts?shipment_id=3&warehouse_id=7`, `${P}/receipts?per_page=30&shipment_id=3&warehouse_id=7`],
    [`${P}/receipts?after_id=0`, `${P}/receipts?after_id=0&per_page=30`],
    [`${P}/receipts?after_id=9007199254740991`, `${P}/receipts?after_id=9007199254740991&per_page=30`],
    [`${P}/receipts?&&per_page=5&`, `${P}/receipts?per_page=5`],
    [`${P}/warehouses?active=true`, `${P}/warehouses?active=true&per_page=30`],
    [`${P}/warehouses?active=false`, `${P}/warehouses?active=false&per_page=30`],
    // `+` is a space (form encoding), `%2B` a plus; both come out strictly encoded.
    [`${P}/warehouses?code=Z%C3%BCrich+Nord`, `${P}/warehouses?code=Z%C3%BCrich%20Nord&per_page=30`],
    [`${P}/warehouses?code=Z%C3%BCrich%20Nord`, `${P}/warehouses?code=Z%C3%BCrich%20Nord&per_page=30`],
    [`${P}/warehouses?code=A%2BB%2F7`, `${P}/warehouses?code=A%2BB%2F7&per_page=30`],
    [`${P}/warehouses?code=A+B/7`, `${P}/warehouses?code=A%20B%2F7&per_page=30`],
    // `;` does not split pairs: the cloaked per_page stays inside the value (docs/architecture.md#cache-poisoning).
    [`${P}/transfers?status=a;per_page=100`, `${P}/transfers?per_page=30&status=a%3Bper_page%3D100`],
    [`${P}/warehouses?code=it's(*)!`, `${P}/warehouses?code=it%27s%28%2A%29%21&per_page=30`],
    [`${P}/receipts/1`, `${P}/receipts/1`],
    [`${P}/receipts/9007199254740991`, `${P}/receipts/9007199254740991`],
  ])('%s → %s', (url, canonical) => {
    expect(read(url).upstreamTarget).toBe(canonical);
  });

  it('every filter of every grammar is accepted on its resource', () => {
    expect(read(`${P}/movements?item_type=slab&item_id=12&movement_type=sale`).query).toBe(
      'item_id=12&item_type=slab&movement_type=sale&per_page=30',
    );
  });

  it('counts text length in characters, not bytes or UTF-16 units', () => {
    expect(read(`${P}/warehouses?code=${'é'.repeat(128)}`).kind).toBe('list');
    expect(read(`${P}/warehouses?code=${'😀'.repeat(128)}`).kind).toBe('list');
    expect(refusal(`${P}/warehouses?code=${'😀'.repeat(129)}`).code).toBe('invalid_parameter');
  });
});

describe('refused parameters (400 invalid_parameter, naming the parameter)', () => {
  it.each(REFUSED_PARAMETERS)('%s', (_label, url, parameter) => {
    const error = refusal(url);
    expect(error).toBeInstanceOf(InvalidParameterError);
    expect(error.code).toBe('invalid_parameter');
    expect(error.status).toBe(400);
    expect((error as InvalidParameterError).parameter).toBe(parameter);
  });
});

describe('refused requests', () => {
  it.each(REFUSED_REQUESTS)('%s → %s', (_label, url, code) => {
    expect(refusal(url).code).toBe(code);
  });

  it('leaves paths outside the API prefix to the fallback plane', () => {
    expect(classifyTarget('/healthz').kind).toBe('other');
    expect(classifyTarget('/api/slab/v1/operationsX').kind).toBe('other');
    expect(classifyTarget('*').kind).toBe('other');
    expect(classifyTarget(`${P}/receipts?x=1`)).toEqual({ kind: 'api', path: 'receipts', rawQuery: 'x=1' });
  });
});
