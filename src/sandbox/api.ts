/**
 * The sandbox's answer to an API request (seed §2, §4, §5, §7), past its own counting, rate limit
 * and faults: the method, the path, the credential, the permission, the query, then a page or a
 * record. Its refusals, checked in this order: 405 (not GET or HEAD), 404 (no such resource or path),
 * 401 (seed §7: no valid credential), 403 (seed §7: access denied), 400 (a query the seed does not
 * allow), 404 (no such record in the credential's company).
 *
 * Company scoping (seed §5.2: every answer holds only the credential's company's records, and
 * another company's record is a 404 like a missing one, §4) and keyset pages (seed §4: `data`,
 * `meta.per_page`, `meta.has_more`, `meta.next_after_id`; null when there is no next page) are here.
 * A page or a record is answered with its validators, or 304 to a request that has it already
 * (`validators.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { denial } from './access.js';
import { bearerToken, type Credential } from './credentials.js';
import type { Dataset, SandboxRecord } from './dataset.js';
import { json } from './json.js';
import { type ListQuery, readListQuery, readRecordQuery, recordId } from './query.js';
import { type ResourceName, type SeedResource, seedResource } from './resources.js';
import type { Representations } from './validators.js';

/** Checks a bearer token's signature and claims: the credential it stands for, or none. */
export type TokenChecker = (token: string) => Promise<Credential | undefined>;

/**
 * When what a page shows last changed, in live mode (change-log.ts); `undefined` while live mode
 * never started: the validators then date a page from when its body was first answered.
 */
export interface PageChanges {
  /** `shownAt`: the latest `updated_at` of the records the page shows (ms). */
  list(
    company: string,
    resource: ResourceName,
    query: ListQuery,
    page: { readonly lastId: number | undefined; readonly hasMore: boolean; readonly shownAt: number },
  ): number | undefined;
  record(
    company: string,
    resource: ResourceName,
    record: { readonly id: number; readonly shownAt: number },
  ): number | undefined;
}

/** The latest `updated_at` of these records, ms since the epoch (0 for none). */
function latestUpdate(records: ReadonlyArray<Readonly<Record<string, unknown>>>): number {
  let latest = 0;
  for (const record of records) {
    const at = typeof record.updated_at === 'string' ? Date.parse(record.updated_at) : Number.NaN;
    if (Number.isFinite(at) && at > latest) latest = at;
  }
  return latest;
}

/** Seed §5.2: a record is the credential's when it belongs to the credential's company. */
function owns(credential: Credential, record: SandboxRecord): boolean {
  return String(record.company_id) === credential.company;
}

/** A keyset page as answered, and the id of its last record. */
interface KeysetPage {
  readonly value: {
    readonly data: readonly SandboxRecord[];
    readonly meta: { readonly per_page: number; readonly has_more: boolean; readonly next_after_id: number | null };
  };
  readonly lastId: number | undefined;
}

export class SandboxApi {
  readonly #dataset: Dataset;
  readonly #checkToken: TokenChecker;
  readonly #representations: Representations;
  readonly #changes: PageChanges | undefined;

  constructor(dataset: Dataset, checkToken: TokenChecker, representations: Representations, changes?: PageChanges) {
    this.#dataset = dataset;
    this.#checkToken = checkToken;
    this.#representations = representations;
    this.#changes = changes;
  }

  /** Answers a request for `path` (below the API prefix, without the query) and `search` (the query). */
  async answer(req: IncomingMessage, res: ServerResponse, path: string, search: string): Promise<void> {
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return json(res, 405, { error: 'method_not_allowed' }, { allow: 'GET, HEAD' });
    const [name = '', id, ...rest] = path.split('/');
    const resource = seedResource(name);
    if (resource === undefined || rest.length > 0) return json(res, 404, { error: 'not_found' });
    const credential = await this.#authenticate(req);
    if (credential === undefined) {
      return json(
        res,
        401,
        { error: 'unauthenticated' },
        { 'www-authenticate': 'Bearer realm="sandbox", error="invalid_token"' },
      );
    }
    const denied = denial(credential, resource);
    if (denied !== undefined)
      return json(res, 403, { error: 'forbidden', reason: denied.reason, missing: denied.missing });
    // What the answer is a representation of: this company's view of this target.
    const page = `${credential.company}\n${path}?${search}`;
    if (id === undefined) {
      const query = readListQuery(search, resource);
      if ('invalid' in query) return json(res, 400, { error: 'invalid_parameter', parameter: query.invalid });
      const list = this.#list(resource, credential, query);
      const changedAt = this.#changes?.list(credential.company, resource.name, query, {
        lastId: list.lastId,
        hasMore: list.value.meta.has_more,
        shownAt: latestUpdate(list.value.data),
      });
      return this.#representations.answer(req, res, page, list.value, changedAt);
    }
    const refused = readRecordQuery(search);
    if (refused !== undefined) return json(res, 400, { error: 'invalid_parameter', parameter: refused.invalid });
    const record = this.#single(resource, credential, id);
    if (record === undefined) return json(res, 404, { error: 'not_found' });
    const changedAt = this.#changes?.record(credential.company, resource.name, {
      id: record.id,
      shownAt: latestUpdate([record]),
    });
    this.#representations.answer(req, res, page, { data: record }, changedAt);
  }

  async #authenticate(req: IncomingMessage): Promise<Credential | undefined> {
    const token = bearerToken(req.headersDistinct.authorization);
    return token === undefined ? undefined : this.#checkToken(token);
  }

  /** Seed §4: a keyset page of the company's records, filtered, ordered by id; and its last record's id. */
  #list(resource: SeedResource, credential: Credential, query: ListQuery): KeysetPage {
    const page: SandboxRecord[] = [];
    let hasMore = false;
    for (const record of this.#dataset.get(resource.name) ?? []) {
      if (record.id <= query.afterId || !owns(credential, record)) continue;
      if (!query.filters.every(([name, value]) => String(record[name]) === value)) continue;
      if (page.length === query.perPage) {
        hasMore = true;
        break;
      }
      page.push(record);
    }
    const last = page[page.length - 1];
    return {
      value: {
        data: page,
        meta: {
          per_page: query.perPage,
          has_more: hasMore,
          next_after_id: hasMore && last !== undefined ? last.id : null,
        },
      },
      lastId: last?.id,
    };
  }

  /** Seed §4: one record; another company's record is answered exactly like a missing one (404). */
  #single(resource: SeedResource, credential: Credential, idText: string): SandboxRecord | undefined {
    const id = recordId(idText);
    const record = id === undefined ? undefined : (this.#dataset.get(resource.name) ?? []).find((r) => r.id === id);
    return record === undefined || !owns(credential, record) ? undefined : record;
  }
}
