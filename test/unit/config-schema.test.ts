/**
 * The config file's JSON Schema (generated from the zod schema): committed current, named by the
 * `# yaml-language-server: $schema=…` line of every config file in the repository, and a second
 * judge that agrees with the start's own loader: the shipped files validate with ajv (JSON Schema
 * 2020-12), and each bad file fails with ajv as it does with zod, at the same key.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ConfigError, parseConfigText } from '../../src/config/load.js';
import { CONFIG_SCHEMA_FILE, renderConfigJsonSchema } from '../../src/reference/config-schema.js';

const schema = JSON.parse(readFileSync(CONFIG_SCHEMA_FILE, 'utf8')) as Record<string, unknown>;
const validate = new Ajv2020({ allErrors: false }).compile(schema);

/** Config files in the repository, each of which should name the schema. */
const CONFIG_FILES = ['config/default.yaml', 'config/loadtest.yaml', 'deploy/kubernetes/base/config.yaml'];

/** ajv's first error as a dotted key, the way `ConfigError` names it. */
function ajvKey(errors: readonly ErrorObject[] | null | undefined): string {
  const error = errors?.[0];
  if (error === undefined) return '(valid)';
  const path = error.instancePath.split('/').filter((part) => part !== '');
  if (error.keyword === 'additionalProperties')
    path.push(String((error.params as { additionalProperty: string }).additionalProperty));
  return path.join('.');
}

function zodKey(text: string): string {
  try {
    parseConfigText(text, 'ops.yaml');
  } catch (error) {
    if (error instanceof ConfigError) return error.key;
    throw error;
  }
  return '(valid)';
}

describe('config JSON Schema', () => {
  it(`is committed current in ${CONFIG_SCHEMA_FILE} (run \`npm run docs\` to refresh it)`, () => {
    expect(readFileSync(CONFIG_SCHEMA_FILE, 'utf8')).toBe(renderConfigJsonSchema());
  });

  it.each(CONFIG_FILES)('%s names the schema for editors, and validates with it', (file) => {
    const text = readFileSync(file, 'utf8');
    const [, reference] = /^# yaml-language-server: \$schema=(\S+)$/m.exec(text) ?? [];
    expect(reference).toBeDefined();
    expect(resolve(dirname(file), reference ?? '')).toBe(resolve(CONFIG_SCHEMA_FILE));
    expect(existsSync(resolve(dirname(file), reference ?? ''))).toBe(true);
    expect(validate(parseYaml(text)), JSON.stringify(validate.errors)).toBe(true);
    expect(zodKey(text)).toBe('(valid)');
  });

  it('takes a partial file and an empty one: every key left out has its default', () => {
    expect(validate({})).toBe(true);
    expect(validate({ upstream: { timeout: 2 }, cache: { resources: { receipts: { partition: 'employee' } } } })).toBe(
      true,
    );
    const properties = schema.properties as Record<string, { properties: Record<string, { default?: unknown }> }>;
    expect(properties.upstream?.properties.timeout?.default).toBe(10);
    expect(properties.cache?.properties.partition?.default).toBe('company');
  });

  it.each([
    ['an unknown top-level key', 'caches: {}', 'caches'],
    ['an unknown nested key', 'cache:\n  defaults: { tll: 5 }', 'cache.defaults.tll'],
    ['an unknown resource', 'cache:\n  resources:\n    widgets: { ttl: 5 }', 'cache.resources.widgets'],
    ['a negative duration', 'cache:\n  defaults: { ttl: -1 }', 'cache.defaults.ttl'],
    ['a fractional ttl', 'cache:\n  defaults: { ttl: 1.5 }', 'cache.defaults.ttl'],
    ['a string where a number goes', 'upstream: { timeout: "10" }', 'upstream.timeout'],
    ['a zero timeout', 'upstream: { timeout: 0 }', 'upstream.timeout'],
    ['an unknown partition', 'cache: { partition: tenant }', 'cache.partition'],
    ['a bad key prefix', 'cache: { keyPrefix: "a:b" }', 'cache.keyPrefix'],
    ['a zero rate', 'rateLimit:\n  perCompany: { points: 0, duration: 60 }', 'rateLimit.perCompany.points'],
    ['a command timeout over 100 ms', 'redis: { commandTimeoutMs: 250 }', 'redis.commandTimeoutMs'],
    ['a non-boolean switch', 'upstream: { passthrough: "yes" }', 'upstream.passthrough'],
    ['an empty claim name', 'auth:\n  claims: { company: "" }', 'auth.claims.company'],
  ])('%s fails with ajv as with zod, at %s', (_label, text, key) => {
    expect(validate(parseYaml(text))).toBe(false);
    expect(ajvKey(validate.errors)).toBe(key);
    expect(zodKey(text)).toBe(key);
  });
});
