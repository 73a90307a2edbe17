/**
 * The OpenAPI 3.1 description of the client surface, generated from the catalog (the 26 reads and
 * their filters, each value grammar as an exact pattern) and the error registry (every problem
 * code under its status), so it cannot drift from the code. Served on the admin port as
 * `/openapi.json` and written to `docs/openapi.json` by `npm run docs` (a test checks it is current).
 */

import {
  FILTER_TEXT_PATTERN,
  type FilterGrammar,
  GRAMMAR_DESCRIPTIONS,
  PER_PAGE_DEFAULT,
  PER_PAGE_MAX,
} from '../catalog/grammar.js';
import { API_PREFIX, RESOURCES, type ResourceDef } from '../catalog/resources.js';
import { ALLOWED_METHODS, FORBIDDEN_REASONS } from '../errors/proxy-error.js';
import { ERROR_CODES, ERROR_REGISTRY, type ErrorCode, problemType } from '../errors/registry.js';
import { REQUEST_ID } from '../http/request-id.js';
import { PACKAGE_VERSION } from '../platform/package.js';

/** Where the description is committed, from the repository root. */
export const OPENAPI_FILE = 'docs/openapi.json';

type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };
type JsonObject = { readonly [key: string]: Json };

/**
 * A regular expression for the decimal integers from 1 to `bound`, without leading zeros: the
 * shorter lengths, then at each digit of the bound a smaller digit followed by any digits, then
 * the bound itself. JSON Schema cannot compare a string's numeric value, so the bound is spelled
 * out in the pattern: `^[1-9][0-9]{0,15}$` alone would admit ids above 2^53−1, which the proxy
 * refuses (docs/clients.md#request-rules).
 */
export function positiveDecimalUpTo(bound: string): string {
  if (!/^[1-9][0-9]*$/.test(bound)) throw new TypeError(`not a positive decimal: ${bound}`);
  const anyDigits = (count: number): string => (count === 0 ? '' : count === 1 ? '[0-9]' : `[0-9]{${String(count)}}`);
  const range = (from: number, to: number): string => (from === to ? String(from) : `[${String(from)}-${String(to)}]`);
  const alternatives: string[] = [];
  if (bound.length > 1) alternatives.push(bound.length === 2 ? '[1-9]' : `[1-9][0-9]{0,${String(bound.length - 2)}}`);
  for (let position = 0; position < bound.length; position++) {
    const digit = Number(bound[position]);
    const lowest = position === 0 ? 1 : 0;
    if (digit > lowest)
      alternatives.push(
        `${bound.slice(0, position)}${range(lowest, digit - 1)}${anyDigits(bound.length - position - 1)}`,
      );
  }
  alternatives.push(bound);
  return alternatives.join('|');
}

const SAFE_ID = positiveDecimalUpTo(String(Number.MAX_SAFE_INTEGER));

/** Each value grammar (docs/clients.md#resources) as an exact, anchored pattern. */
export const GRAMMAR_PATTERNS: Readonly<Record<FilterGrammar | 'cursor' | 'perPage', string>> = {
  id: `^(?:${SAFE_ID})$`,
  boolean: '^(?:true|false)$',
  text: FILTER_TEXT_PATTERN,
  cursor: `^(?:0|${SAFE_ID})$`,
  perPage: `^(?:${positiveDecimalUpTo(String(PER_PAGE_MAX))})$`,
};

/**
 * Registry codes no read operation answers with: 405 is for methods other than the ones described
 * here (it is in the description's text), and the admin API's own code is not the client's.
 */
export const CODES_NOT_ON_READS: Readonly<Partial<Record<ErrorCode, string>>> = {
  method_not_allowed: `methods other than ${ALLOWED_METHODS}: not an operation of this description`,
  shared_state_unavailable: 'the admin API only',
};

/** The problem codes a read can answer with, by status (registry order). */
export function readCodesByStatus(): ReadonlyMap<number, readonly ErrorCode[]> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of ERROR_CODES) {
    if (CODES_NOT_ON_READS[code] !== undefined) continue;
    const { status } = ERROR_REGISTRY[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return byStatus;
}

/** Members some problems add (docs/clients.md#errors). */
const PROBLEM_EXTRAS: Readonly<Partial<Record<ErrorCode, JsonObject>>> = {
  invalid_parameter: {
    required: ['parameter'],
    properties: { parameter: { type: 'string', description: 'The query parameter at fault.' } },
  },
  forbidden: {
    required: ['reason', 'missing'],
    properties: {
      reason: { enum: FORBIDDEN_REASONS },
      missing: {
        type: 'array',
        items: { type: 'string' },
        description: 'Permission names the credential (or employee) lacks.',
      },
    },
  },
  rate_limited: {
    required: ['retry_after', 'policy'],
    properties: {
      retry_after: { type: 'integer', minimum: 0, description: 'Seconds to wait, as in `Retry-After`.' },
      policy: { type: 'string', description: 'The policy that refused: `credential`, `company` or `upstream`.' },
    },
  },
};

/** Upstream answers passed on unchanged for these statuses (docs/clients.md#errors). */
const UPSTREAM_PASSED_ON = new Set([401, 403, 404, 429]);

const HEADERS: Readonly<Record<string, JsonObject>> = {
  'Cache-Status': {
    description:
      'RFC 9211, member `slab-proxy`: e.g. `slab-proxy; hit; ttl=12`, `slab-proxy; fwd=miss; fwd-status=200; stored`.',
    schema: { type: 'string', pattern: '^slab-proxy(?:; .+)?$' },
  },
  'Cache-Control': {
    description:
      '`private, max-age=<seconds of freshness>` on 200 and 404 (with `Age`: what is left is max-age − Age, RFC 9111 §4.2.3); `no-store` on errors.',
    schema: { type: 'string' },
  },
  Vary: { description: 'Names `Authorization`: each credential has its own answer.', schema: { type: 'string' } },
  ETag: {
    description: 'A strong validator of the body (RFC 9110 §8.8.3); send it back in `If-None-Match` for a 304.',
    schema: { type: 'string', pattern: '^"[!#-~]*"$' },
  },
  Age: { description: 'Seconds since the answer was stored (RFC 9111 §5.1).', schema: { type: 'integer', minimum: 0 } },
  RateLimit: {
    description:
      'draft-ietf-httpapi-ratelimit-headers-11: the tighter policy\'s remaining quota and seconds to reset, e.g. `"credential";r=17;t=42`.',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description:
      'draft-ietf-httpapi-ratelimit-headers-11: every policy, e.g. `"credential";q=600;w=60, "company";q=3000;w=60`.',
    schema: { type: 'string' },
  },
  'X-Request-Id': {
    description: "The client's own id when it fits the pattern, else a new UUID; also sent upstream.",
    schema: { type: 'string', pattern: REQUEST_ID.source },
  },
  'Retry-After': {
    description: "Seconds (RFC 9110 §10.2.3); the upstream's own value, as it sent it, on its 429s.",
    schema: { type: 'string' },
  },
  'WWW-Authenticate': {
    description: 'RFC 6750 §3: `Bearer realm="slab-ops"`, with `error="invalid_token"` when a token was given.',
    schema: { type: 'string', pattern: '^Bearer ' },
  },
};

const header = (name: keyof typeof HEADERS): JsonObject => ({ $ref: `#/components/headers/${name}` });

/** Headers every read answer carries once authenticated; each answer adds its own. */
const COMMON_HEADERS = {
  'X-Request-Id': header('X-Request-Id'),
  RateLimit: header('RateLimit'),
  'RateLimit-Policy': header('RateLimit-Policy'),
};
const CACHED_HEADERS = {
  ...COMMON_HEADERS,
  'Cache-Status': header('Cache-Status'),
  'Cache-Control': header('Cache-Control'),
  Vary: header('Vary'),
  ETag: header('ETag'),
  Age: header('Age'),
};

function pascal(name: string): string {
  return name
    .split('-')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

/** One code's problem: the common members, its own `code`, `type` and `status`, and its extra members. */
function problemSchemaOf(code: ErrorCode): JsonObject {
  const extras = PROBLEM_EXTRAS[code];
  return {
    allOf: [
      { $ref: '#/components/schemas/Problem' },
      {
        properties: {
          code: { const: code },
          type: { const: problemType(code) },
          status: { const: ERROR_REGISTRY[code].status },
        },
      },
      ...(extras === undefined ? [] : [extras]),
    ],
  };
}

function problemSchemaFor(codes: readonly ErrorCode[]): JsonObject {
  const [only] = codes;
  return codes.length === 1 && only !== undefined ? problemSchemaOf(only) : { oneOf: codes.map(problemSchemaOf) };
}

function errorResponses(): Record<string, JsonObject> {
  const responses: Record<string, JsonObject> = {};
  for (const [status, codes] of readCodesByStatus()) {
    const passedOn = UPSTREAM_PASSED_ON.has(status);
    responses[`Error${String(status)}`] = {
      description: `${codes.map((code) => `\`${code}\` (${ERROR_REGISTRY[code].title})`).join(', ')}${passedOn ? "; or the upstream's own answer, passed on unchanged" : ''}.`,
      headers: {
        ...COMMON_HEADERS,
        'Cache-Control': header('Cache-Control'),
        ...(passedOn && { 'Cache-Status': header('Cache-Status') }),
        ...(status === 401 && { 'WWW-Authenticate': header('WWW-Authenticate') }),
        ...((status === 429 || status === 503) && { 'Retry-After': header('Retry-After') }),
      },
      content: {
        'application/problem+json': { schema: problemSchemaFor(codes) },
        ...(passedOn && { 'application/json': { schema: { description: "The upstream's body, unchanged." } } }),
      },
    };
  }
  return responses;
}

function errorRefs(statuses: readonly number[]): Record<string, JsonObject> {
  return Object.fromEntries(
    statuses.map((status) => [String(status), { $ref: `#/components/responses/Error${String(status)}` }]),
  );
}

function filterParameter(name: string, grammar: FilterGrammar): JsonObject {
  return {
    name,
    in: 'query',
    required: false,
    description: `Filter: ${GRAMMAR_DESCRIPTIONS[grammar].replace(/`/g, '')}.`,
    schema: { type: 'string', pattern: GRAMMAR_PATTERNS[grammar] },
  };
}

/** What the list and the record operation of a resource share. */
function commonOperation(resource: ResourceDef): {
  readonly tags: Json;
  readonly security: Json;
  readonly parameters: readonly Json[];
} {
  return {
    tags: [resource.group],
    security: [{ bearer: [] }],
    parameters: [{ $ref: '#/components/parameters/XRequestId' }, { $ref: '#/components/parameters/IfNoneMatch' }],
  };
}

/** A read's answers: its 200, the 304 of a matching `If-None-Match`, and the errors by status. */
function readResponses(described: string, schema: string, errorStatuses: readonly number[]): JsonObject {
  return {
    '200': {
      description: described,
      headers: CACHED_HEADERS,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } },
    },
    '304': { $ref: '#/components/responses/NotModified' },
    ...errorRefs(errorStatuses),
  };
}

function permissionsOf(resource: ResourceDef): string {
  return resource.requiredPermissions.map((p) => `\`${p}\``).join(' + ');
}

/** `GET /api/v1/<resource>`: a keyset page of the company's records. */
function listOperation(resource: ResourceDef, errorStatuses: readonly number[]): JsonObject {
  const common = commonOperation(resource);
  return {
    ...common,
    operationId: `list${pascal(resource.name)}`,
    summary: `List ${resource.name} of the credential's company`,
    description: `Needs ${permissionsOf(resource)}. Keyset pages: repeat the filters with \`after_id\` = \`meta.next_after_id\` while \`meta.has_more\`. Only these parameters, each at most once and not empty.`,
    parameters: [
      ...common.parameters,
      { $ref: '#/components/parameters/PerPage' },
      { $ref: '#/components/parameters/AfterId' },
      ...resource.filters.map((filter) => filterParameter(filter.name, filter.grammar)),
    ],
    responses: readResponses("A page, the upstream's bytes unchanged.", 'Page', errorStatuses),
  };
}

/** `GET /api/v1/<resource>/{id}`: one record. */
function recordOperation(resource: ResourceDef, errorStatuses: readonly number[]): JsonObject {
  const common = commonOperation(resource);
  return {
    ...common,
    operationId: `get${pascal(resource.name)}ById`,
    summary: `One record of ${resource.name}`,
    description: `Needs ${permissionsOf(resource)}. Takes no query parameters. A malformed id is a 404 without asking the upstream; the upstream's 404 for a record is cached for \`notFoundTtl\`.`,
    parameters: [...common.parameters, { $ref: '#/components/parameters/Id' }],
    responses: readResponses("The record, the upstream's bytes unchanged.", 'Record', errorStatuses),
  };
}

/** Every resource's two paths, in catalog order. */
function paths(errorStatuses: readonly number[]): JsonObject {
  return Object.fromEntries(
    RESOURCES.flatMap((resource) => [
      [`${API_PREFIX}/${resource.name}`, { get: listOperation(resource, errorStatuses) }],
      [`${API_PREFIX}/${resource.name}/{id}`, { get: recordOperation(resource, errorStatuses) }],
    ]),
  );
}

const INFO_DESCRIPTION = [
  'The read surface of the slab operations API, as the caching proxy serves it: the same paths, statuses and bodies as the upstream, with the headers below.',
  `Every read also answers HEAD (as GET, without a body) and OPTIONS (204, \`Allow: ${ALLOWED_METHODS}\`); any other method is 405 \`method_not_allowed\` with \`Allow\`.`,
  'Errors the proxy makes are RFC 9457 problem details whose `code` is stable; precedence: request-level 400s, then 401, 429, 404, 405, 403, 400.',
].join('\n\n');

const SECURITY_SCHEMES: JsonObject = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      "A JWT of the company (`company_id`), with `view_slab` and the resource's permission; never in the query (`access_token` is refused).",
  },
};

/** The parameters the operations refer to (`#/components/parameters/…`); the filters are inline. */
const PARAMETERS: JsonObject = {
  PerPage: {
    name: 'per_page',
    in: 'query',
    required: false,
    description: `Page size, 1 to ${String(PER_PAGE_MAX)}; absent means ${String(PER_PAGE_DEFAULT)}.`,
    schema: { type: 'string', pattern: GRAMMAR_PATTERNS.perPage, default: String(PER_PAGE_DEFAULT) },
  },
  AfterId: {
    name: 'after_id',
    in: 'query',
    required: false,
    description: 'Keyset cursor: `meta.next_after_id` of the previous page (0 or a positive integer up to 2^53-1).',
    schema: { type: 'string', pattern: GRAMMAR_PATTERNS.cursor },
  },
  Id: {
    name: 'id',
    in: 'path',
    required: true,
    description: 'The record id: a positive integer up to 2^53-1, no leading zeros.',
    schema: { type: 'string', pattern: GRAMMAR_PATTERNS.id },
  },
  XRequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description: 'Kept when it fits; else a new UUID is given.',
    schema: { type: 'string' },
  },
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description: 'An `ETag` from an earlier answer: 304 while it still matches.',
    schema: { type: 'string' },
  },
};

/** The proxy's own errors (RFC 9457 problem details), a record and a keyset page (seed §4). */
const SCHEMAS: JsonObject = {
  Problem: {
    type: 'object',
    description: 'RFC 9457 problem details.',
    required: ['type', 'title', 'status', 'code', 'detail', 'request_id'],
    properties: {
      type: { type: 'string', pattern: '^urn:slab-ops-proxy:problem:[a-z_]+$' },
      title: { type: 'string' },
      status: { type: 'integer' },
      code: { enum: ERROR_CODES },
      detail: { type: 'string' },
      request_id: { type: 'string' },
    },
  },
  Record: { type: 'object', description: "One record, as the upstream sent it; its fields are the upstream's." },
  Page: {
    type: 'object',
    required: ['data', 'meta'],
    properties: {
      data: { type: 'array', items: { $ref: '#/components/schemas/Record' } },
      meta: {
        type: 'object',
        properties: {
          per_page: { type: 'integer', minimum: 1, maximum: PER_PAGE_MAX },
          has_more: { type: 'boolean' },
          next_after_id: { type: ['integer', 'null'], description: 'The cursor for the next page.' },
        },
      },
    },
  },
};

function components(): JsonObject {
  return {
    securitySchemes: SECURITY_SCHEMES,
    parameters: PARAMETERS,
    headers: HEADERS,
    schemas: SCHEMAS,
    responses: {
      NotModified: { description: '`If-None-Match` matched the current `ETag`: no body.', headers: CACHED_HEADERS },
      ...errorResponses(),
    },
  };
}

/** The whole description, as a JSON value. */
export function buildOpenApiDocument(): JsonObject {
  const errorStatuses = [...readCodesByStatus().keys()].sort((a, b) => a - b);
  const groups = [...new Set(RESOURCES.map((r) => r.group))];
  return {
    openapi: '3.1.0',
    info: {
      title: 'slab-ops-proxy: the slab operations API, cached',
      version: PACKAGE_VERSION,
      description: INFO_DESCRIPTION,
    },
    security: [{ bearer: [] }],
    tags: groups.map((name) => ({ name })),
    paths: paths(errorStatuses),
    components: components(),
  };
}

/** The description as served and committed: two-space JSON with a final newline. */
export function renderOpenApi(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}
