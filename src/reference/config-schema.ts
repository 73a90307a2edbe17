/**
 * The config file's JSON Schema (draft 2020-12), generated from the zod schema with zod's own
 * `z.toJSONSchema`, so editors (the `# yaml-language-server: $schema=…` line of
 * `config/default.yaml`) and other tools check a file as the start does. `npm run docs` writes it
 * to `config/schema.json`; a test checks it is current.
 *
 * The zod schema validates the file *merged over the defaults*, where every key is present; an
 * operator's file may leave any key out. So in the file's schema no key is required, and each
 * leaf carries its built-in default (JSON Schema's `default` annotation, 2020-12 §9.2).
 */
import { z } from 'zod';
import { BUILT_IN_CONFIG, configSchema } from '../config/schema.js';

/** Where the schema is committed, from the repository root. */
export const CONFIG_SCHEMA_FILE = 'config/schema.json';

type JsonObject = { [key: string]: unknown };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Drops `required` everywhere and annotates each leaf with the default found at its path. */
function asFileSchema(schema: JsonObject, defaults: unknown): JsonObject {
  const result: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'required') continue;
    if (key === 'properties' && isObject(value)) {
      result.properties = Object.fromEntries(
        Object.entries(value).map(([name, property]) => [
          name,
          isObject(property) ? asFileSchema(property, isObject(defaults) ? defaults[name] : undefined) : property,
        ]),
      );
    } else {
      result[key] = value;
    }
  }
  if (result.type !== 'object' && defaults !== undefined) result.default = defaults;
  return result;
}

export function buildConfigJsonSchema(): JsonObject {
  const { $schema, ...generated } = z.toJSONSchema(configSchema, { target: 'draft-2020-12' }) as JsonObject;
  return {
    $schema,
    title: 'slab-ops-proxy configuration (CONFIG_FILE)',
    description:
      'YAML; every key left out takes the built-in default shown in config/default.yaml. Durations are whole seconds. Generated from the zod schema by `npm run docs`.',
    ...asFileSchema(generated, BUILT_IN_CONFIG),
  };
}

/** The schema as committed: two-space JSON with a final newline. */
export function renderConfigJsonSchema(): string {
  return `${JSON.stringify(buildConfigJsonSchema(), null, 2)}\n`;
}
