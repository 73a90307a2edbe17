/**
 * The live sandbox's change feed (docs/sandbox.md#the-change-feed), as a system of record's webhook
 * would send it: each change made is POSTed to a URL — the proxy's `/admin/cache/invalidate` —
 * as `{"changes": [{"company_id", "resource", "ids"}]}`, with a bearer token. Changes made while a
 * POST is in flight go in the next one (one in flight at a time, so they arrive in order); a body
 * holds at most `MAX_IDS` ids. A POST that fails is tried once more, then counted and dropped: the
 * reader's TTL still bounds what it misses.
 */
import type { Change } from './change-log.js';

/** Ids in one POST at most: well within the proxy's 16 KiB body. */
const MAX_IDS = 500;
/** How long one POST may take, ms. */
const TIMEOUT_MS = 5_000;

export interface WebhookTarget {
  readonly url: string;
  /** Sent as `Authorization: Bearer …`; never logged or answered. */
  readonly token: string;
}

export interface WebhookStatus {
  readonly url: string;
  /** Changes the target acknowledged (a 2xx). */
  readonly delivered: number;
  /** Changes dropped after two failed POSTs. */
  readonly dropped: number;
  /** Changes waiting for the next POST. */
  readonly pending: number;
  /** The last failure: an HTTP status, or the error's name. */
  readonly lastFailure: string | null;
}

interface ChangeGroup {
  readonly company_id: string;
  readonly resource: string;
  readonly ids: number[];
}

/** The changes by company and resource, in bodies of at most `MAX_IDS` ids. */
function bodies(changes: readonly Change[]): Array<{ readonly changes: ChangeGroup[]; readonly count: number }> {
  const out: Array<{ changes: ChangeGroup[]; count: number }> = [];
  let body = { changes: [] as ChangeGroup[], count: 0 };
  const groups = new Map<string, ChangeGroup>();
  for (const change of changes) {
    if (body.count === MAX_IDS) {
      out.push(body);
      body = { changes: [], count: 0 };
      groups.clear();
    }
    const key = `${change.company} ${change.resource}`;
    let group = groups.get(key);
    if (group === undefined) {
      group = { company_id: change.company, resource: change.resource, ids: [] };
      groups.set(key, group);
      body.changes.push(group);
    }
    if (!group.ids.includes(change.id)) group.ids.push(change.id);
    body.count += 1;
  }
  if (body.count > 0) out.push(body);
  return out;
}

export class ChangeWebhook {
  readonly #target: WebhookTarget;
  #pending: Change[] = [];
  #sending = false;
  #delivered = 0;
  #dropped = 0;
  #lastFailure: string | null = null;
  /** Resolves when nothing is pending or in flight (tests, and a clean stop). */
  #idle: Promise<void> = Promise.resolve();

  constructor(target: WebhookTarget) {
    this.#target = target;
  }

  /** A change made: sent with the next POST. */
  changed(change: Change): void {
    this.#pending.push(change);
    if (!this.#sending) this.#idle = this.#drain();
  }

  /** Settles once every change made so far was delivered or dropped. */
  idle(): Promise<void> {
    return this.#idle;
  }

  status(): WebhookStatus {
    return {
      url: this.#target.url,
      delivered: this.#delivered,
      dropped: this.#dropped,
      pending: this.#pending.length,
      lastFailure: this.#lastFailure,
    };
  }

  async #drain(): Promise<void> {
    this.#sending = true;
    try {
      // Changes made in the same turn (one tick of live mode) go together.
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.#pending.length > 0) {
        const changes = this.#pending;
        this.#pending = [];
        for (const body of bodies(changes)) {
          const sent = (await this.#post(body.changes)) || (await this.#post(body.changes));
          if (sent) this.#delivered += body.count;
          else this.#dropped += body.count;
        }
      }
    } finally {
      this.#sending = false;
    }
  }

  async #post(changes: readonly ChangeGroup[]): Promise<boolean> {
    try {
      const response = await fetch(this.#target.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.#target.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ changes }),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      await response.arrayBuffer();
      if (response.ok) return true;
      this.#lastFailure = String(response.status);
    } catch (error) {
      this.#lastFailure = error instanceof Error ? error.name : 'error';
    }
    return false;
  }
}
