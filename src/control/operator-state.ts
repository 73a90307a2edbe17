/**
 * The operator state, as data: TTL overrides, revocations (`jti`, token digest, `sub`), blocks
 * (company, employee) and companies' weights in the upstream budget's line. Pure: no I/O, no clock
 * of its own.
 *
 * It is a last-writer-wins map (a state-based CRDT): every entry carries the stamp of the change that
 * wrote it, and a deletion is an entry too (a tombstone, kept 30 days). Two copies merge by keeping,
 * per entry, the later stamp. That is what lets every replica write back what it knows when Redis
 * has lost the state (a flush, an empty restart, a failover to a replica that lagged) without
 * undoing anything: an entry Redis lacks comes back, a later change (a deletion included) wins over
 * an earlier one whichever replica writes first. Entries leave only by expiring: a revocation at its
 * token's `exp`, a tombstone after its retention. Nothing else ever removes one.
 */
import { z } from 'zod';
import { POLICY_DURATIONS, type PolicyOverride, policyOverrideSchema } from '../catalog/policy-durations.js';
import { isResourceName, type ResourceName } from '../catalog/resources.js';

/**
 * A run-time override of a resource's cache policy: at least one of its durations, its prefetch
 * switch (docs/cache.md#prefetch) or its automatic lifetimes (docs/cache.md#automatic-lifetimes).
 */
export const ttlOverrideSchema = policyOverrideSchema.refine((value) => Object.keys(value).length > 0, {
  message: `at least one of ${[...POLICY_DURATIONS, 'prefetch', 'autoTtl'].join(', ')}`,
});

export type TtlOverride = PolicyOverride;
export type TtlOverrides = Partial<Record<ResourceName, TtlOverride>>;

/** A company's slots per turn in the upstream budget's line (docs/limits.md#fair-shares), as `upstream.companyWeights`. */
export const companyWeightSchema = z.strictObject({ weight: z.number().int().min(1).max(100) });
export type CompanyWeight = z.infer<typeof companyWeightSchema>;
/** Company → weight: the run-time weights in force. */
export type CompanyWeights = Readonly<Record<string, number>>;

/** How long a deletion is remembered, so that a copy that missed it cannot bring the entry back. */
export const TOMBSTONE_RETENTION_MS = 30 * 86_400_000;

/**
 * The kinds of entry and their field prefixes: `ttl:<resource>`, `jti:<id>`, `tok:<sha-256 hex>`,
 * `sub:<subject>`, `co:<company>`, `em:<company>/<employee>` (company ids cannot hold `/`),
 * `wt:<company>`.
 */
export const ENTRY_KINDS = ['ttl', 'jti', 'tok', 'sub', 'co', 'em', 'wt'] as const;
export type EntryKind = (typeof ENTRY_KINDS)[number];

export interface StateEntry {
  /** The change's stamp: ms since the epoch on Redis's clock (made unique per entry). */
  readonly t: number;
  /** The value; `null` for a deletion. A TTL override's value is the override, a weight's the weight; others `true`. */
  readonly v: TtlOverride | CompanyWeight | true | null;
  /** When the entry expires, ms since the epoch (a revocation's `exp`, a tombstone's end); `null`: never. */
  readonly x: number | null;
}

export function fieldOf(kind: EntryKind, id: string): string {
  return `${kind}:${id}`;
}

export function parseField(field: string): { readonly kind: EntryKind; readonly id: string } | undefined {
  const colon = field.indexOf(':');
  const kind = field.slice(0, colon);
  const id = field.slice(colon + 1);
  if (colon < 1 || id === '' || !(ENTRY_KINDS as readonly string[]).includes(kind)) return undefined;
  return { kind: kind as EntryKind, id };
}

const entrySchema = z.strictObject({
  t: z.number().int().nonnegative(),
  v: z.union([z.literal(true), z.null(), companyWeightSchema, ttlOverrideSchema]),
  x: z.number().int().nonnegative().nullable(),
});

/** The stored text of an entry (also what the change script writes, in the same shape). */
export function encodeEntry(entry: StateEntry): string {
  return JSON.stringify({ t: entry.t, x: entry.x, v: entry.v });
}

/** An entry read back from Redis or a message; `undefined` for anything malformed (never thrown). */
export function decodeEntry(field: string, text: string): StateEntry | undefined {
  const parsed = parseField(field);
  if (parsed === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const result = entrySchema.safeParse(json);
  if (!result.success) return undefined;
  const entry = result.data;
  // A value of the wrong kind (an override on a revocation, `true` on a TTL field) is not an entry.
  if (entry.v !== null && valueKind(entry.v) !== (parsed.kind === 'ttl' || parsed.kind === 'wt' ? parsed.kind : true))
    return undefined;
  if (parsed.kind === 'ttl' && !isResourceName(parsed.id)) return undefined;
  return entry;
}

/** What a live value is: a TTL override, a weight, or `true` (a revocation, a block). */
function valueKind(value: TtlOverride | CompanyWeight | true): 'ttl' | 'wt' | true {
  if (value === true) return true;
  return 'weight' in value ? 'wt' : 'ttl';
}

/** True when `incoming` wins over `current` (the later stamp; equal stamps by their text, so every copy picks the same). */
export function wins(incoming: StateEntry, current: StateEntry | undefined): boolean {
  if (current === undefined) return true;
  if (incoming.t !== current.t) return incoming.t > current.t;
  return encodeEntry(incoming) > encodeEntry(current);
}

export interface RevocationView {
  readonly kind: 'jti' | 'digest' | 'sub';
  readonly id: string;
  /** Seconds since the epoch, for `jti` and `digest`. */
  readonly exp?: number;
}

export interface BlockView {
  readonly kind: 'company' | 'employee';
  readonly company_id: string;
  readonly employee_id?: string;
}

/** The state, indexed for the questions the hit path asks. */
export class OperatorState {
  readonly #entries = new Map<string, StateEntry>();
  /** jti / digest → `exp` in ms; only live (not deleted) revocations. */
  readonly #tokenIds = new Map<string, number>();
  readonly #digests = new Map<string, number>();
  readonly #subjects = new Set<string>();
  readonly #companies = new Set<string>();
  readonly #employees = new Set<string>();
  #overrides: TtlOverrides = {};
  #weights: CompanyWeights = {};

  /** Applies an entry if it wins over the one held; true when it changed anything. */
  apply(field: string, entry: StateEntry): boolean {
    const parsed = parseField(field);
    if (parsed === undefined || !wins(entry, this.#entries.get(field))) return false;
    this.#entries.set(field, entry);
    this.#index(parsed.kind, parsed.id, entry);
    return true;
  }

  /** Sets an entry whatever its stamp: the same change, restamped by Redis. */
  replace(field: string, entry: StateEntry): void {
    const parsed = parseField(field);
    if (parsed === undefined) return;
    this.#entries.set(field, entry);
    this.#index(parsed.kind, parsed.id, entry);
  }

  get(field: string): StateEntry | undefined {
    return this.#entries.get(field);
  }

  /** Every entry, deletions included: what a write-back sends. */
  entries(): IterableIterator<[string, StateEntry]> {
    return this.#entries.entries();
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Drops the entries that expired by `nowMs` (revocations past `exp`, old tombstones). */
  prune(nowMs: number): void {
    for (const [field, entry] of this.#entries) {
      if (entry.x === null || entry.x > nowMs) continue;
      this.#entries.delete(field);
      const parsed = parseField(field);
      if (parsed !== undefined) this.#index(parsed.kind, parsed.id, undefined);
    }
  }

  #index(kind: EntryKind, id: string, entry: StateEntry | undefined): void {
    const live = entry !== undefined && entry.v !== null;
    switch (kind) {
      case 'ttl': {
        if (!isResourceName(id)) return;
        const next = { ...this.#overrides };
        if (live && entry.v !== true && entry.v !== null && !('weight' in entry.v)) next[id] = entry.v;
        else delete next[id];
        this.#overrides = next;
        return;
      }
      case 'wt': {
        const next: Record<string, number> = { ...this.#weights };
        if (live && entry.v !== true && entry.v !== null && 'weight' in entry.v) next[id] = entry.v.weight;
        else delete next[id];
        this.#weights = next;
        return;
      }
      case 'jti':
        setOrDelete(this.#tokenIds, id, live ? entry.x : null);
        return;
      case 'tok':
        setOrDelete(this.#digests, id, live ? entry.x : null);
        return;
      case 'sub':
        addOrDelete(this.#subjects, id, live);
        return;
      case 'co':
        addOrDelete(this.#companies, id, live);
        return;
      case 'em':
        addOrDelete(this.#employees, id, live);
        return;
    }
  }

  // ── what the hit path asks (each a Map or Set lookup; nothing hashed unless needed) ──

  /** A revoked `sub`, or a revoked `jti` whose `exp` has not passed. */
  isRevoked(
    principal: { readonly subject?: string | undefined; readonly tokenId?: string | undefined },
    nowMs: number,
  ): boolean {
    if (principal.subject !== undefined && this.#subjects.size > 0 && this.#subjects.has(principal.subject))
      return true;
    if (principal.tokenId === undefined || this.#tokenIds.size === 0) return false;
    const until = this.#tokenIds.get(principal.tokenId);
    return until !== undefined && until > nowMs;
  }

  /** Whether any token is revoked by digest: only then is a token worth hashing. */
  get hasDigests(): boolean {
    return this.#digests.size > 0;
  }

  isDigestRevoked(digest: string, nowMs: number): boolean {
    const until = this.#digests.get(digest);
    return until !== undefined && until > nowMs;
  }

  isCompanyBlocked(company: string): boolean {
    return this.#companies.size > 0 && this.#companies.has(company);
  }

  isEmployeeBlocked(company: string, employee: string): boolean {
    return this.#employees.size > 0 && this.#employees.has(`${company}/${employee}`);
  }

  overrides(): TtlOverrides {
    return this.#overrides;
  }

  /** The run-time company weights; a new object after each change. */
  weights(): CompanyWeights {
    return this.#weights;
  }

  // ── what the operator API lists ──

  revocations(): RevocationView[] {
    const out: RevocationView[] = [];
    for (const [id, until] of this.#tokenIds) out.push({ kind: 'jti', id, exp: Math.floor(until / 1000) });
    for (const [id, until] of this.#digests) out.push({ kind: 'digest', id, exp: Math.floor(until / 1000) });
    for (const id of this.#subjects) out.push({ kind: 'sub', id });
    return out.sort((a, b) => (a.kind === b.kind ? compare(a.id, b.id) : compare(a.kind, b.kind)));
  }

  blocks(): BlockView[] {
    const out: BlockView[] = [...this.#companies].map((company) => ({ kind: 'company' as const, company_id: company }));
    for (const id of this.#employees) {
      const slash = id.indexOf('/');
      out.push({ kind: 'employee', company_id: id.slice(0, slash), employee_id: id.slice(slash + 1) });
    }
    return out.sort((a, b) =>
      compare(`${a.kind}/${a.company_id}/${a.employee_id ?? ''}`, `${b.kind}/${b.company_id}/${b.employee_id ?? ''}`),
    );
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function setOrDelete(map: Map<string, number>, id: string, until: number | null): void {
  if (until === null) map.delete(id);
  else map.set(id, until);
}

function addOrDelete(set: Set<string>, id: string, present: boolean): void {
  if (present) set.add(id);
  else set.delete(id);
}
