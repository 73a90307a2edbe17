/**
 * The sandbox's own copy of the seed's resource table, written from the specification alone
 * (seed §2 and §5), not taken from the proxy's catalog: the thirteen resource names (exact path
 * segments), the filters each list accepts, and the permission each needs besides `view_slab`.
 * The sandbox judges the proxy, so a mistake in the proxy's catalog must not be repeated here.
 */

/** Seed §4: every path is relative to this prefix. */
export const API_PREFIX = '/api/slab/v1/operations';

/** Seed §5: every resource needs this permission, plus its own one (the same one for the inventory group). */
export const BASE_PERMISSION = 'view_slab';

const TABLE = [
  // Seed §2 (resource, filters) and §5 (additional permission), row by row.
  { name: 'receipt-items', filters: ['receipt_id', 'shipment_item_id', 'slab_id'], permission: 'view_slab_logistics' },
  { name: 'receipts', filters: ['shipment_id', 'warehouse_id'], permission: 'view_slab_logistics' },
  { name: 'supplier-materials', filters: ['supplier_id', 'material_id'], permission: 'view_slab_purchasing' },
  { name: 'fulfilments', filters: ['allocation_id', 'status'], permission: 'view_slab_fulfilment' },
  { name: 'fulfilment-proofs', filters: ['fulfilment_id', 'kind'], permission: 'view_slab_fulfilment' },
  {
    name: 'transfers',
    filters: ['status', 'from_warehouse_id', 'to_warehouse_id'],
    permission: 'manage_slab_transfer',
  },
  { name: 'transfer-items', filters: ['transfer_id', 'slab_id'], permission: 'manage_slab_transfer' },
  { name: 'stocktakes', filters: ['warehouse_id', 'status'], permission: 'manage_slab_stocktake' },
  { name: 'quote-links', filters: ['project_id', 'reservation_id'], permission: 'view_slab_sales' },
  { name: 'quote-link-items', filters: ['quote_link_id', 'slab_id'], permission: 'view_slab_sales' },
  // "movements, remnants, warehouses: view_slab (the same permission; nothing more)".
  { name: 'movements', filters: ['item_type', 'item_id', 'movement_type'], permission: BASE_PERMISSION },
  { name: 'remnants', filters: ['parent_slab_id', 'warehouse_id', 'status'], permission: BASE_PERMISSION },
  { name: 'warehouses', filters: ['active', 'code'], permission: BASE_PERMISSION },
] as const;

export type ResourceName = (typeof TABLE)[number]['name'];

export interface SeedResource {
  readonly name: ResourceName;
  /** The list's filters, in the seed's order. */
  readonly filters: readonly string[];
  /** Every permission needed, `view_slab` first, each once. */
  readonly permissions: readonly string[];
}

export const SEED_RESOURCES: readonly SeedResource[] = TABLE.map((row) =>
  Object.freeze({
    name: row.name,
    filters: Object.freeze([...row.filters]),
    permissions: Object.freeze(
      row.permission === BASE_PERMISSION ? [BASE_PERMISSION] : [BASE_PERMISSION, row.permission],
    ),
  }),
);

const BY_NAME: ReadonlyMap<string, SeedResource> = new Map(SEED_RESOURCES.map((r) => [r.name, r]));

/** Exact lookup: resource names are the path segments of seed §2, nothing else (`Receipts` is not one). */
export function seedResource(name: string): SeedResource | undefined {
  return BY_NAME.get(name);
}

export function isResourceName(name: string): name is ResourceName {
  return BY_NAME.has(name);
}
