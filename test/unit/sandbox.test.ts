/**
 * The sandbox's dataset (docs/sandbox.md), as pure data: deterministic for a seed, every resource in every
 * company, one resource deep enough to page through, ids unique and ordered, filter values that vary;
 * and how its validator settings are read.
 */
import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../../src/catalog/resources.js';
import {
  generateDataset,
  LARGE_COMPANY,
  LARGE_RESOURCE,
  SANDBOX_COMPANIES,
  type SandboxRecord,
} from '../../src/sandbox/dataset.js';
import { parseValidatorSettings, ValidatorError, validatorsFromText } from '../../src/sandbox/validators.js';

const dataset = generateDataset();

function recordsOf(name: string): readonly SandboxRecord[] {
  const resource = RESOURCES.find((r) => r.name === name);
  if (resource === undefined) throw new Error(`no resource ${name}`);
  return dataset.get(resource.name) ?? [];
}

function serialise(value: ReturnType<typeof generateDataset>): string {
  return JSON.stringify(RESOURCES.map((r) => [r.name, value.get(r.name)]));
}

describe('the sandbox dataset', () => {
  it('is the same, byte for byte, for the same seed (default and explicit)', () => {
    expect(serialise(generateDataset())).toBe(serialise(dataset));
    expect(serialise(generateDataset(7))).toBe(serialise(generateDataset(7)));
  });

  it('differs for another seed', () => {
    expect(serialise(generateDataset(7))).not.toBe(serialise(generateDataset(8)));
  });

  it('holds exactly the thirteen resources of the catalog', () => {
    expect([...dataset.keys()].sort()).toEqual(RESOURCES.map((r) => r.name).sort());
  });

  it.each(RESOURCES.map((r) => r.name))('%s has records in every company', (name) => {
    const records = recordsOf(name);
    for (const company of SANDBOX_COMPANIES) {
      expect(records.filter((r) => r.company_id === company).length, `${name} / ${String(company)}`).toBeGreaterThan(0);
    }
    // No record belongs to a company outside the list.
    expect(records.every((r) => SANDBOX_COMPANIES.includes(r.company_id))).toBe(true);
  });

  it('gives company 1 several hundred movements (enough pages to walk)', () => {
    expect(LARGE_RESOURCE).toBe('movements');
    expect(LARGE_COMPANY).toBe(1);
    const count = recordsOf('movements').filter((r) => r.company_id === 1).length;
    expect(count).toBeGreaterThanOrEqual(300);
    // More than three default pages of 30 and more than one page of the maximum 100.
    expect(count).toBeGreaterThan(100);
  });

  it('keeps ids unique across companies and across resources', () => {
    const all = RESOURCES.flatMap((r) => recordsOf(r.name).map((record) => record.id));
    expect(new Set(all).size).toBe(all.length);
    expect(all.every((id) => Number.isSafeInteger(id) && id > 0)).toBe(true);
  });

  it.each(RESOURCES.map((r) => r.name))('%s is sorted by id, strictly ascending', (name) => {
    const ids = recordsOf(name).map((r) => r.id);
    for (let i = 1; i < ids.length; i++) expect(ids[i] as number).toBeGreaterThan(ids[i - 1] as number);
  });

  it.each(RESOURCES.map((r) => r.name))(
    '%s records carry id, company_id, every filter field and timestamps',
    (name) => {
      const resource = RESOURCES.find((r) => r.name === name);
      for (const record of recordsOf(name)) {
        expect(typeof record.id).toBe('number');
        for (const filter of resource?.filters ?? [])
          expect(record[filter.name], `${name}.${filter.name}`).not.toBeUndefined();
        expect(typeof record.created_at).toBe('string');
        expect(typeof record.updated_at).toBe('string');
      }
    },
  );

  it.each(RESOURCES.flatMap((r) => r.filters.map((f) => [r.name, f.name] as const)))(
    '%s.%s takes more than one value in company 1',
    (name, filter) => {
      const values = new Set(
        recordsOf(name)
          .filter((r) => r.company_id === 1)
          .map((r) => String(r[filter])),
      );
      expect(values.size).toBeGreaterThan(1);
    },
  );

  it('has values that match several records, so that a filter selects a subset', () => {
    for (const resource of RESOURCES) {
      for (const filter of resource.filters) {
        const inCompany = recordsOf(resource.name).filter((r) => r.company_id === 1);
        const counts = new Map<string, number>();
        for (const r of inCompany) counts.set(String(r[filter.name]), (counts.get(String(r[filter.name])) ?? 0) + 1);
        const largest = Math.max(...counts.values());
        expect(largest, `${resource.name}.${filter.name}`).toBeLessThan(inCompany.length);
      }
    }
  });

  it('includes warehouse codes that need percent-encoding', () => {
    const codes = new Set(recordsOf('warehouses').map((r) => String(r.code)));
    for (const code of ['Zürich Nord', 'A+B/7', 'yard & dock', 'bay=3;east']) expect(codes.has(code), code).toBe(true);
  });

  it('makes references to other resources point at a real record of the same company', () => {
    const references: ReadonlyArray<readonly [string, string, string]> = [
      ['receipt-items', 'receipt_id', 'receipts'],
      ['receipts', 'warehouse_id', 'warehouses'],
      ['fulfilment-proofs', 'fulfilment_id', 'fulfilments'],
      ['transfers', 'from_warehouse_id', 'warehouses'],
      ['transfers', 'to_warehouse_id', 'warehouses'],
      ['transfer-items', 'transfer_id', 'transfers'],
      ['stocktakes', 'warehouse_id', 'warehouses'],
      ['quote-link-items', 'quote_link_id', 'quote-links'],
      ['remnants', 'warehouse_id', 'warehouses'],
    ];
    for (const [name, filter, target] of references) {
      const owners = new Map(recordsOf(target).map((r) => [r.id, r.company_id]));
      for (const record of recordsOf(name)) {
        expect(owners.get(record[filter] as number), `${name}#${record.id}.${filter}`).toBe(record.company_id);
      }
    }
  });

  it('types active as a boolean with both values present', () => {
    const actives = new Set(recordsOf('warehouses').map((r) => r.active));
    expect(actives).toEqual(new Set([true, false]));
  });
});

describe('the sandbox’s validator settings', () => {
  it('reads SANDBOX_VALIDATORS', () => {
    expect(validatorsFromText('etag,last-modified')).toEqual({ etag: true, lastModified: true });
    expect(validatorsFromText(' last-modified , etag ')).toEqual({ etag: true, lastModified: true });
    expect(validatorsFromText('etag')).toEqual({ etag: true, lastModified: false });
    expect(validatorsFromText('last-modified')).toEqual({ etag: false, lastModified: true });
    expect(validatorsFromText('none')).toEqual({ etag: false, lastModified: false });
    for (const bad of ['', 'none,etag', 'etags', 'weak']) expect(validatorsFromText(bad), bad).toBeUndefined();
  });

  it('reads a control API body, keeping what it leaves out', () => {
    const on = { etag: true, lastModified: true };
    expect(parseValidatorSettings({ etag: false }, on)).toEqual({ etag: false, lastModified: true });
    expect(parseValidatorSettings({}, on)).toEqual(on);
    for (const bad of [null, [], 'x', { etag: 'no' }, { weak: true }])
      expect(() => parseValidatorSettings(bad, on)).toThrow(ValidatorError);
  });
});
