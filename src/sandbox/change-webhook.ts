/**
 * The live sandbox's change feed (docs/sandbox.md#the-change-feed), as a system of record's webhook
 * would send it: each change made is POSTed to a URL — the proxy's `/admin/cache/invalidate` —
 * as `{"changes": [{"company_id", "resource", "ids"}]}`, with a bearer token (the proxy's
 * `INVALIDATE_TOKEN`, or its `ADMIN_TOKEN`). Delivery is at least once: the proxy's invalidations
 * are idempotent and order-free (docs/cache.md#soft-invalidation), so a body sent twice does no
 * harm, while one lost leaves pages fresh that are not.
 *
 * One POST is in flight at a time. Changes made meanwhile wait behind it and are merged into the
 * next bodies (a record changed twice while they waited is sent once); a body holds at most
 * `MAX_IDS` ids. A POST answered 429, 408 or 5xx, or not answered (refused, reset, timed out), is
 * sent again, the same body, after a backoff: 100 ms doubling to 5 s, each wait drawn between its
 * step and half again (so that senders do not retry in step), and never shorter than a
 * `Retry-After` asks (RFC 9110 §10.2.3). Any other answer cannot succeed by being repeated (a
 * token refused, a body refused): its changes are counted dropped and the next body goes on.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { pauseFromRetryAfter } from '../http/retry-after.js';
import type { Change } from './change-log.js';

/** Ids in one POST at most: well within the proxy's 16 KiB body. */
const MAX_IDS = 500;
/** How long one POST may take, ms. */
const TIMEOUT_MS = 5_000;
/** The first wait before a body is sent again, ms; each next one doubles, up to `MAX_BACKOFF_MS`. */
export const FIRST_BACKOFF_MS = 100;
export const MAX_BACKOFF_MS = 5_000;

export interface WebhookTarget {
  readonly url: string;
  /** Sent as `Authorization: Bearer …`; never logged or answered. */
  readonly token: string;
  /** Told of each body given up on (its failure and its changes), for a log line. */
  readonly onGiveUp?: (failure: string, changes: number) => void;
}

export interface WebhookStatus {
  readonly url: string;
  /** Changes the target acknowledged (a 2xx). */
  readonly delivered: number;
  /** Changes given up on: refused by an answer that repeating cannot change, or unsent when the webhook stopped. */
  readonly dropped: number;
  /** POSTs sent again after a 429, 408, 5xx or no answer. */
  readonly retries: number;
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

interface Body {
  readonly changes: ChangeGroup[];
  /** Changes it carries, a record changed twice counted twice. */
  count: number;
  /** Ids it names. */
  ids: number;
}

/** The changes by company and resource, in bodies of at most `MAX_IDS` ids, each id once per body. */
function bodies(changes: readonly Change[]): Body[] {
  const out: Body[] = [];
  let body: Body = { changes: [], count: 0, ids: 0 };
  const groups = new Map<string, ChangeGroup>();
  for (const change of changes) {
    const key = `${change.company} ${change.resource}`;
    const known = groups.get(key)?.ids.includes(change.id) === true;
    if (!known && body.ids === MAX_IDS) {
      out.push(body);
      body = { changes: [], count: 0, ids: 0 };
      groups.clear();
    }
    let group = groups.get(key);
    if (group === undefined) {
      group = { company_id: change.company, resource: change.resource, ids: [] };
      groups.set(key, group);
      body.changes.push(group);
    }
    if (!group.ids.includes(change.id)) {
      group.ids.push(change.id);
      body.ids += 1;
    }
    body.count += 1;
  }
  if (body.count > 0) out.push(body);
  return out;
}

/** The wait before the `attempt`-th sending again (1 first): its step of the doubling, up to half again at random. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const step = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (attempt - 1));
  return Math.min(MAX_BACKOFF_MS, step * (1 + random() / 2));
}

/** What one POST came to: acknowledged, worth sending again (after at least `waitMs`), or refused for good. */
type Sent =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly waitMs: number }
  | { readonly kind: 'refused' };

/** Answers that repeating the same request may change: too many requests, a timeout, the server's own failures. */
function isTransient(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

export class ChangeWebhook {
  readonly #target: WebhookTarget;
  #pending: Change[] = [];
  #sending = false;
  #delivered = 0;
  #dropped = 0;
  #retries = 0;
  #lastFailure: string | null = null;
  /** Resolves when nothing is pending or in flight (tests, and a clean stop). */
  #idle: Promise<void> = Promise.resolve();
  /** Aborted by `close`: a POST in flight and a wait before the next end at once. */
  readonly #stop = new AbortController();

  constructor(target: WebhookTarget) {
    this.#target = target;
  }

  /** A change made: sent with the next POST (dropped once the webhook is closed). */
  changed(change: Change): void {
    if (this.#stop.signal.aborted) {
      this.#dropped += 1;
      return;
    }
    this.#pending.push(change);
    if (!this.#sending) this.#idle = this.#drain();
  }

  /** Settles once every change made so far was delivered or dropped. */
  idle(): Promise<void> {
    return this.#idle;
  }

  /** Stops sending: a body being retried, and the changes waiting behind it, are dropped. */
  close(): void {
    this.#stop.abort();
  }

  status(): WebhookStatus {
    return {
      url: this.#target.url,
      delivered: this.#delivered,
      dropped: this.#dropped,
      retries: this.#retries,
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
          if (await this.#deliver(body)) this.#delivered += body.count;
          else this.#dropped += body.count;
        }
      }
    } finally {
      this.#sending = false;
    }
  }

  /** Sends `body` until it is acknowledged or refused for good, or the webhook is closed. */
  async #deliver(body: Body): Promise<boolean> {
    for (let attempt = 1; !this.#stop.signal.aborted; attempt += 1) {
      const sent = await this.#post(body.changes);
      if (sent.kind === 'delivered') return true;
      if (sent.kind === 'refused') break;
      if (this.#stop.signal.aborted) break;
      this.#retries += 1;
      const waitMs = Math.max(backoffMs(attempt), sent.waitMs);
      await delay(waitMs, undefined, { signal: this.#stop.signal, ref: false }).catch(() => undefined);
    }
    this.#target.onGiveUp?.(this.#lastFailure ?? 'stopped', body.count);
    return false;
  }

  async #post(changes: readonly ChangeGroup[]): Promise<Sent> {
    try {
      const response = await fetch(this.#target.url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.#target.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ changes }),
        signal: AbortSignal.any([this.#stop.signal, AbortSignal.timeout(TIMEOUT_MS)]),
      });
      await response.arrayBuffer();
      if (response.ok) return { kind: 'delivered' };
      this.#lastFailure = String(response.status);
      if (!isTransient(response.status)) return { kind: 'refused' };
      const retryAfter = response.headers.get('retry-after');
      return { kind: 'retry', waitMs: retryAfter === null ? 0 : pauseFromRetryAfter(retryAfter, Date.now()) };
    } catch (error) {
      this.#lastFailure = error instanceof Error ? error.name : 'error';
      return { kind: 'retry', waitMs: 0 };
    }
  }
}
