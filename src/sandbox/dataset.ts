/**
 * The sandbox's deterministic data (docs/sandbox.md): several companies, every resource populated in
 * every company, one resource with several hundred records in one company, related ids that point
 * at real records, filter values that vary (including text that needs percent-encoding), ids
 * unique across companies and resources, ordered by id. The same seed always gives the same bytes.
 */
import { type ResourceName, SEED_RESOURCES, type SeedResource } from './resources.js';

export type SandboxRecord = Readonly<Record<string, string | number | boolean | null>> & {
  readonly id: number;
  readonly company_id: string | number;
};

export type Dataset = ReadonlyMap<ResourceName, readonly SandboxRecord[]>;

/** Numeric tenants and one text tenant: claims may type a company either way (docs/credentials.md). */
export const SANDBOX_COMPANIES: readonly (string | number)[] = [1, 2, 3, 'globex'];

/** Company 1's movements: enough pages to walk (several hundred records). */
export const LARGE_RESOURCE: ResourceName = 'movements';
export const LARGE_COMPANY = 1;
const LARGE_COUNT = 420;

/** mulberry32: a small, fast, well-distributed 32-bit PRNG; deterministic for a seed. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The values a text filter takes, by `<resource>.<filter>` (a record's status moves among them: live.ts). */
export const TEXT_VALUES: Readonly<Record<string, readonly string[]>> = {
  'fulfilments.status': ['pending', 'in_progress', 'fulfilled', 'cancelled'],
  'transfers.status': ['draft', 'in_transit', 'received', 'cancelled'],
  'stocktakes.status': ['planned', 'counting', 'completed'],
  'remnants.status': ['available', 'reserved', 'consumed', 'scrapped'],
  'fulfilment-proofs.kind': ['photo', 'signature', 'delivery_note'],
  'movements.item_type': ['slab', 'remnant', 'offcut'],
  'movements.movement_type': ['receipt', 'transfer_out', 'transfer_in', 'sale', 'adjustment', 'scrap'],
  // Codes that need encoding: a space, a non-ASCII letter, `+`, `/`, `&`, `=` and `;`.
  'warehouses.code': ['LYN-01', 'Zürich Nord', 'A+B/7', 'yard & dock', 'bay=3;east', 'MAIN'],
};

/** Filters that name another resource of the catalog point at that company's real records. */
const REFERENCES: Readonly<Record<string, ResourceName>> = {
  receipt_id: 'receipts',
  fulfilment_id: 'fulfilments',
  transfer_id: 'transfers',
  quote_link_id: 'quote-links',
  warehouse_id: 'warehouses',
  from_warehouse_id: 'warehouses',
  to_warehouse_id: 'warehouses',
};

/** Generation order: referenced resources first. */
const ORDER: readonly ResourceName[] = [
  'warehouses',
  'receipts',
  'receipt-items',
  'supplier-materials',
  'fulfilments',
  'fulfilment-proofs',
  'transfers',
  'transfer-items',
  'stocktakes',
  'quote-links',
  'quote-link-items',
  'movements',
  'remnants',
];

/** Each resource's own fields besides its filters and times (what an update of a record changes: live.ts). */
export const DOMAIN_FIELDS: Readonly<
  Record<ResourceName, (random: () => number, id: number) => Record<string, string | number>>
> = {
  warehouses: (r) => ({ name: `Warehouse ${Math.floor(r() * 90) + 10}`, capacity_slabs: Math.floor(r() * 900) + 100 }),
  receipts: (_r, id) => ({ reference: `RCP-${id}` }),
  'receipt-items': (r) => ({ quantity: Math.floor(r() * 8) + 1, condition: r() < 0.9 ? 'ok' : 'damaged' }),
  'supplier-materials': (r) => ({ unit_price_cents: Math.floor(r() * 50_000) + 5_000, currency: 'EUR' }),
  fulfilments: (_r, id) => ({ reference: `FUL-${id}` }),
  'fulfilment-proofs': (_r, id) => ({ file_name: `proof-${id}.jpg` }),
  transfers: (_r, id) => ({ reference: `TRF-${id}` }),
  'transfer-items': (r) => ({ quantity: Math.floor(r() * 4) + 1 }),
  stocktakes: (r) => ({ counted_slabs: Math.floor(r() * 400) }),
  'quote-links': (_r, id) => ({ token_hint: `QL${id.toString(36).toUpperCase()}` }),
  'quote-link-items': (r) => ({ price_cents: Math.floor(r() * 200_000) + 10_000 }),
  movements: (r) => ({ quantity: Math.floor(r() * 5) + 1 }),
  remnants: (r) => ({ width_mm: Math.floor(r() * 1500) + 200, length_mm: Math.floor(r() * 2500) + 300 }),
};

const EPOCH = Date.UTC(2026, 0, 1);

function recordCount(resource: ResourceName, company: string | number, random: () => number): number {
  if (resource === LARGE_RESOURCE && company === LARGE_COMPANY) return LARGE_COUNT;
  return 24 + Math.floor(random() * 48);
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}

function filterValue(
  resource: SeedResource,
  filter: string,
  company: string | number,
  random: () => number,
  made: ReadonlyMap<ResourceName, SandboxRecord[]>,
): string | number | boolean {
  const target = REFERENCES[filter];
  if (target !== undefined) {
    const pool = (made.get(target) ?? []).filter((r) => r.company_id === company);
    const pick = pool[Math.floor(random() * pool.length)];
    if (pick !== undefined) return pick.id;
  }
  if (filter === 'active') return random() < 0.75;
  const vocabulary = TEXT_VALUES[`${resource.name}.${filter}`];
  if (vocabulary !== undefined) return vocabulary[Math.floor(random() * vocabulary.length)] as string;
  // Other related ids (slabs, shipments, suppliers…): a small pool, so a filter matches several.
  return 500_000 + Math.floor(random() * 12) * 7;
}

export function generateDataset(seed = 20_261_122): Dataset {
  const random = prng(seed);
  const made = new Map<ResourceName, SandboxRecord[]>();
  ORDER.forEach((name, index) => {
    const resource = SEED_RESOURCES.find((r) => r.name === name);
    if (resource === undefined) throw new Error(`unknown resource ${name}`);
    const owners = shuffle(
      SANDBOX_COMPANIES.flatMap((company) => Array.from({ length: recordCount(name, company, random) }, () => company)),
      random,
    );
    const records: SandboxRecord[] = [];
    let id = (index + 1) * 100_000;
    for (const company of owners) {
      id += 1 + Math.floor(random() * 3); // gaps, as ids of a real table have
      // Every date in the weeks after EPOCH (ids of a resource run within its own hundred thousand):
      // a page's records are all older than the sandbox's start, as a system of record's are.
      const createdAt = EPOCH + (id % 100_000) * 37_000;
      const record: Record<string, string | number | boolean | null> = { id, company_id: company };
      for (const filter of resource.filters) record[filter] = filterValue(resource, filter, company, random, made);
      Object.assign(record, DOMAIN_FIELDS[name](random, id));
      record.created_at = new Date(createdAt).toISOString();
      record.updated_at = new Date(createdAt + Math.floor(random() * 86_400_000)).toISOString();
      records.push(record as SandboxRecord);
    }
    made.set(name, records);
  });
  return made;
}
