/**
 * The OpenAPI description of the client surface: a valid OpenAPI 3.1 document (judged by
 * @readme/openapi-parser against the 3.1 specification schema), made of exactly the catalog (the
 * 26 reads, each list's filters plus `per_page` and `after_id`, nothing else), whose value
 * patterns accept exactly what the proxy's grammar checks accept, with every problem code of the
 * error registry under its status; and the committed `docs/openapi.json` is current.
 */
import { readFileSync } from 'node:fs';
import { compileErrors, validate } from '@readme/openapi-parser';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GRAMMAR_CHECKS, isCursor, isPerPage } from '../../src/catalog/grammar.js';
import { API_PREFIX, RESOURCES } from '../../src/catalog/resources.js';
import { ERROR_CODES, ERROR_REGISTRY } from '../../src/errors/registry.js';
import {
  buildOpenApiDocument,
  CODES_NOT_ON_READS,
  GRAMMAR_PATTERNS,
  OPENAPI_FILE,
  positiveDecimalUpTo,
  renderOpenApi,
} from '../../src/reference/openapi.js';

interface Parameter {
  readonly name?: string;
  readonly in?: string;
  readonly $ref?: string;
  readonly schema?: { readonly pattern?: string };
}
interface Operation {
  readonly operationId: string;
  readonly parameters: readonly Parameter[];
  readonly responses: Readonly<Record<string, { readonly $ref?: string }>>;
}
interface Document {
  readonly openapi: string;
  readonly paths: Readonly<Record<string, Readonly<Record<string, Operation>>>>;
  readonly components: {
    readonly parameters: Readonly<Record<string, Parameter>>;
    readonly responses: Readonly<
      Record<string, { readonly content?: Readonly<Record<string, { readonly schema: unknown }>> }>
    >;
  };
}

const document = buildOpenApiDocument() as unknown as Document;

/** A parameter, its `$ref` followed. */
function resolve(parameter: Parameter): Parameter {
  if (parameter.$ref === undefined) return parameter;
  const name = parameter.$ref.replace('#/components/parameters/', '');
  const target = document.components.parameters[name];
  if (target === undefined) throw new Error(`dangling ${parameter.$ref}`);
  return target;
}

function queryParameters(operation: Operation | undefined): Map<string, Parameter> {
  return new Map(
    (operation?.parameters ?? [])
      .map(resolve)
      .filter((p) => p.in === 'query')
      .map((p) => [p.name ?? '', p]),
  );
}

/** Every `code` named by a problem schema under a response: `const` and `enum` members. */
function codesIn(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(codesIn);
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, member]) => {
    if (key === 'code' && typeof member === 'object' && member !== null && 'const' in member)
      return [String(member.const)];
    return codesIn(member);
  });
}

describe('OpenAPI description', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(document.openapi).toBe('3.1.0');
    const result = await validate(OPENAPI_FILE);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.warnings).toEqual([]);
    expect(result.specification).toBe('OpenAPI');
    // The judge does judge: the same document with a response that has no description fails.
    const broken = JSON.parse(renderOpenApi()) as {
      paths: Record<string, { get: { responses: Record<string, object> } }>;
    };
    const [first] = Object.values(broken.paths);
    if (first !== undefined) first.get.responses['200'] = {};
    expect((await validate(broken as unknown as Parameters<typeof validate>[0])).valid).toBe(false);
  });

  it('has exactly the 26 reads of the catalog, GET only', () => {
    const expected = RESOURCES.flatMap((r) => [`${API_PREFIX}/${r.name}`, `${API_PREFIX}/${r.name}/{id}`]).sort();
    expect(Object.keys(document.paths).sort()).toEqual(expected);
    for (const [path, item] of Object.entries(document.paths)) expect(Object.keys(item), path).toEqual(['get']);
    const ids = Object.values(document.paths).map((item) => item.get?.operationId);
    expect(new Set(ids).size).toBe(26);
  });

  it('gives each list exactly its filters, per_page and after_id, and a record read no query parameter', () => {
    for (const resource of RESOURCES) {
      const list = queryParameters(document.paths[`${API_PREFIX}/${resource.name}`]?.get);
      expect([...list.keys()].sort(), resource.name).toEqual(
        ['after_id', 'per_page', ...resource.filters.map((f) => f.name)].sort(),
      );
      for (const filter of resource.filters)
        expect(list.get(filter.name)?.schema?.pattern, filter.name).toBe(GRAMMAR_PATTERNS[filter.grammar]);
      expect(queryParameters(document.paths[`${API_PREFIX}/${resource.name}/{id}`]?.get).size, resource.name).toBe(0);
    }
  });

  it('spells out bounds exactly: the pattern for 1..N accepts exactly the canonical decimals up to N', () => {
    for (const bound of ['1', '9', '10', '100', '101', '909', '1000', '4096', String(Number.MAX_SAFE_INTEGER)]) {
      const pattern = new RegExp(`^(?:${positiveDecimalUpTo(bound)})$`);
      const limit = BigInt(bound);
      fc.assert(
        fc.property(
          fc.oneof(fc.bigInt({ min: 0n, max: limit * 2n + 10n }).map(String), fc.stringMatching(/^[0-9]{1,18}$/)),
          (text) => {
            const canonical = /^[1-9][0-9]*$/.test(text);
            expect(pattern.test(text)).toBe(canonical && BigInt(text) <= limit);
          },
        ),
        { numRuns: 300 },
      );
      expect(pattern.test(bound)).toBe(true);
      expect(pattern.test(String(limit + 1n))).toBe(false);
    }
  });

  it("accepts exactly what the proxy's grammar checks accept", () => {
    const near = [
      '0',
      '00',
      '01',
      '1',
      '30',
      '99',
      '100',
      '101',
      '1000',
      '9007199254740991',
      '9007199254740992',
      '9007199254740990',
      '19007199254740991',
      '8999999999999999',
    ];
    const candidates = fc.oneof(
      fc.constantFrom(...near),
      fc.stringMatching(/^[0-9]{1,17}$/),
      fc.string({ unit: 'binary', maxLength: 140 }),
      fc.constantFrom('true', 'false', 'True', ''),
    );
    const checks: ReadonlyArray<readonly [string, (value: string) => boolean]> = [
      [GRAMMAR_PATTERNS.id, GRAMMAR_CHECKS.id],
      [GRAMMAR_PATTERNS.boolean, GRAMMAR_CHECKS.boolean],
      [GRAMMAR_PATTERNS.text, GRAMMAR_CHECKS.text],
      [GRAMMAR_PATTERNS.cursor, isCursor],
      [GRAMMAR_PATTERNS.perPage, isPerPage],
    ];
    for (const [source, check] of checks) {
      // JSON Schema 2020-12 reads patterns as ECMA-262 with Unicode semantics: the `u` flag.
      const pattern = new RegExp(source, 'u');
      for (const value of near) expect(pattern.test(value), `${source} ${value}`).toBe(check(value));
      fc.assert(
        fc.property(candidates, (value) => {
          expect(pattern.test(value)).toBe(check(value));
        }),
        { numRuns: 500 },
      );
    }
  });

  it('lists every problem code a read can answer under its status, and no other', () => {
    const onReads = ERROR_CODES.filter((code) => CODES_NOT_ON_READS[code] === undefined);
    for (const code of onReads) {
      const { status } = ERROR_REGISTRY[code];
      const response = document.components.responses[`Error${String(status)}`];
      expect(codesIn(response), code).toContain(code);
      // And each read operation answers with that response.
      for (const item of Object.values(document.paths))
        expect(item.get?.responses[String(status)]?.$ref).toBe(`#/components/responses/Error${String(status)}`);
    }
    const documented = Object.entries(document.components.responses).flatMap(([name, response]) =>
      codesIn(response).map((code) => [name, code] as const),
    );
    for (const [name, code] of documented) {
      expect(onReads, name).toContain(code);
      expect(name).toBe(`Error${String(ERROR_REGISTRY[code as keyof typeof ERROR_REGISTRY].status)}`);
    }
    for (const code of Object.keys(CODES_NOT_ON_READS)) expect(documented.map(([, c]) => c)).not.toContain(code);
  });

  it(`is committed current in ${OPENAPI_FILE} (run \`npm run docs\` to refresh it)`, () => {
    expect(readFileSync(OPENAPI_FILE, 'utf8')).toBe(renderOpenApi());
  });
});
