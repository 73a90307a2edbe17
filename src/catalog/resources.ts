/**
 * The one catalog of the thirteen resources of the seed (§2 and §5). Routing, query validation,
 * authorisation, the config schema and the docs' resource tables (docs/clients.md#resources) all
 * derive from it. The sandbox system of record keeps its own copy, written from the seed
 * (docs/architecture.md#the-system-of-record-stands-apart).
 */
import { type FilterGrammar, grammarForFilter } from './grammar.js';

export const API_PREFIX = '/api/slab/v1/operations';

/** The base permission every resource needs (seed §5). */
export const BASE_PERMISSION = 'view_slab';

const RESOURCE_TABLE = [
  {
    name: 'receipt-items',
    group: 'Logistics',
    filters: ['receipt_id', 'shipment_item_id', 'slab_id'],
    permission: 'view_slab_logistics',
  },
  { name: 'receipts', group: 'Logistics', filters: ['shipment_id', 'warehouse_id'], permission: 'view_slab_logistics' },
  {
    name: 'supplier-materials',
    group: 'Purchasing',
    filters: ['supplier_id', 'material_id'],
    permission: 'view_slab_purchasing',
  },
  {
    name: 'fulfilments',
    group: 'Fulfilment and returns',
    filters: ['allocation_id', 'status'],
    permission: 'view_slab_fulfilment',
  },
  {
    name: 'fulfilment-proofs',
    group: 'Fulfilment and returns',
    filters: ['fulfilment_id', 'kind'],
    permission: 'view_slab_fulfilment',
  },
  {
    name: 'transfers',
    group: 'Transfers and stocktakes',
    filters: ['status', 'from_warehouse_id', 'to_warehouse_id'],
    permission: 'manage_slab_transfer',
  },
  {
    name: 'transfer-items',
    group: 'Transfers and stocktakes',
    filters: ['transfer_id', 'slab_id'],
    permission: 'manage_slab_transfer',
  },
  {
    name: 'stocktakes',
    group: 'Transfers and stocktakes',
    filters: ['warehouse_id', 'status'],
    permission: 'manage_slab_stocktake',
  },
  {
    name: 'quote-links',
    group: 'Sales operations',
    filters: ['project_id', 'reservation_id'],
    permission: 'view_slab_sales',
  },
  {
    name: 'quote-link-items',
    group: 'Sales operations',
    filters: ['quote_link_id', 'slab_id'],
    permission: 'view_slab_sales',
  },
  {
    name: 'movements',
    group: 'Inventory',
    filters: ['item_type', 'item_id', 'movement_type'],
    permission: BASE_PERMISSION,
  },
  {
    name: 'remnants',
    group: 'Inventory',
    filters: ['parent_slab_id', 'warehouse_id', 'status'],
    permission: BASE_PERMISSION,
  },
  { name: 'warehouses', group: 'Inventory', filters: ['active', 'code'], permission: BASE_PERMISSION },
] as const;

export type ResourceName = (typeof RESOURCE_TABLE)[number]['name'];
export type Permission = (typeof RESOURCE_TABLE)[number]['permission'];

export interface FilterDef {
  readonly name: string;
  readonly grammar: FilterGrammar;
}

export interface ResourceDef {
  readonly name: ResourceName;
  readonly group: string;
  readonly filters: readonly FilterDef[];
  /** The filter names, for O(1) membership checks on the hot path. */
  readonly filterNames: ReadonlySet<string>;
  /** The resource-specific permission of seed §5 (`view_slab` itself for the inventory group). */
  readonly permission: Permission;
  /** Every permission the resource needs, `view_slab` first, without duplicates. */
  readonly requiredPermissions: readonly string[];
}

export const RESOURCES: readonly ResourceDef[] = RESOURCE_TABLE.map((row) => {
  const filters = row.filters.map((name) => ({ name, grammar: grammarForFilter(name) }));
  return Object.freeze({
    name: row.name,
    group: row.group,
    filters: Object.freeze(filters),
    filterNames: new Set(row.filters),
    permission: row.permission,
    requiredPermissions: Object.freeze([...new Set([BASE_PERMISSION, row.permission])]),
  });
});

export const RESOURCE_NAMES: readonly ResourceName[] = RESOURCES.map((r) => r.name);

const BY_NAME: ReadonlyMap<string, ResourceDef> = new Map(RESOURCES.map((r) => [r.name, r]));

/** Exact, case-sensitive lookup (docs/clients.md#request-rules): `Receipts` is not a resource. */
export function findResource(name: string): ResourceDef | undefined {
  return BY_NAME.get(name);
}

export function isResourceName(name: string): name is ResourceName {
  return BY_NAME.has(name);
}

/** Every permission named by the catalog: what a development token with "all permissions" holds. */
export const ALL_PERMISSIONS: readonly string[] = [...new Set(RESOURCES.flatMap((r) => r.requiredPermissions))];
