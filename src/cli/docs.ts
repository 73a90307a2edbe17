/**
 * `npm run docs`: rewrites what is generated from the code: the documentation's tables (catalog and
 * error registry: docs/clients.md, and the README's resources by group), the OpenAPI description of
 * the client surface (`docs/openapi.json`) and the config file's JSON Schema (`config/schema.json`).
 * Tests check each one is current.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { CONFIG_SCHEMA_FILE, renderConfigJsonSchema } from '../reference/config-schema.js';
import { GENERATED_TABLES, renderTables } from '../reference/doc-tables.js';
import { OPENAPI_FILE, renderOpenApi } from '../reference/openapi.js';

function refresh(file: string, render: (current: string) => string): void {
  let current = '';
  try {
    current = readFileSync(file, 'utf8');
  } catch {
    // Not there yet: written below.
  }
  const next = render(current);
  if (next !== current) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, next);
  }
  process.stdout.write(next === current ? `${file} is up to date\n` : `${file} updated\n`);
}

for (const file of Object.keys(GENERATED_TABLES)) refresh(file, (current) => renderTables(file, current));
refresh(OPENAPI_FILE, renderOpenApi);
refresh(CONFIG_SCHEMA_FILE, renderConfigJsonSchema);
