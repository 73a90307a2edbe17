/**
 * The sandbox's validators and conditional requests (docs/sandbox.md), as an origin server does them
 * (RFC 9110 §8.8, §13): each page and record it answers 200 carries a strong `ETag` (a hash of its
 * body) and a `Last-Modified` (when this company's answer to that target last changed, as far as
 * the sandbox has seen), and a GET or HEAD whose `If-None-Match` matches, or, without one, whose
 * `If-Modified-Since` is not before the page's last change, is answered 304 with no body.
 *
 * Switchable, each on its own (`SandboxOptions.validators`, `PUT /__sandbox/validators`,
 * `SANDBOX_VALIDATORS`): a validator turned off is neither sent nor evaluated, so with both off the
 * sandbox is an upstream that knows no conditional requests at all. On by default.
 *
 * Written from RFC 9110 alone, like the rest of the sandbox from the seed: nothing here comes from the
 * proxy's own validator code, so that the proxy's revalidation is judged against another reading.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface ValidatorSettings {
  /** A strong `ETag` on every 200, and `If-None-Match` evaluated. */
  readonly etag: boolean;
  /** `Last-Modified` on every 200, and `If-Modified-Since` evaluated. */
  readonly lastModified: boolean;
}

export const ALL_VALIDATORS: ValidatorSettings = { etag: true, lastModified: true };

/** Pages whose last change is remembered; the oldest is forgotten beyond (it then counts as changed now). */
const MAX_PAGES = 50_000;

export class ValidatorError extends Error {}

/** Validates a settings body received over the control API: `{etag?: boolean, lastModified?: boolean}`. */
export function parseValidatorSettings(input: unknown, current: ValidatorSettings): ValidatorSettings {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new ValidatorError('validators must be a JSON object');
  const fields = input as Record<string, unknown>;
  for (const key of Object.keys(fields))
    if (key !== 'etag' && key !== 'lastModified') throw new ValidatorError(`unknown validator ${key}`);
  const flag = (key: 'etag' | 'lastModified'): boolean => {
    const value = fields[key];
    if (value === undefined) return current[key];
    if (typeof value !== 'boolean') throw new ValidatorError(`${key} must be true or false`);
    return value;
  };
  return { etag: flag('etag'), lastModified: flag('lastModified') };
}

/** `SANDBOX_VALIDATORS`: `etag,last-modified` (the default), `etag`, `last-modified` or `none`. */
export function validatorsFromText(text: string): ValidatorSettings | undefined {
  const words = new Set(
    text
      .split(',')
      .map((word) => word.trim())
      .filter((word) => word !== ''),
  );
  if (words.size === 1 && words.has('none')) return { etag: false, lastModified: false };
  if (words.size === 0 || [...words].some((word) => word !== 'etag' && word !== 'last-modified')) return undefined;
  return { etag: words.has('etag'), lastModified: words.has('last-modified') };
}

/** RFC 9110 §8.8.3.2: the weak comparison, `W/` ignored on either side. */
function weakMatch(candidate: string, tag: string): boolean {
  const opaque = (value: string): string => (value.startsWith('W/') ? value.slice(2) : value);
  return opaque(candidate) === opaque(tag);
}

/** The entity tags of an `If-None-Match` field (each field line, comma-separated), or `*`. */
function listedTags(req: IncomingMessage): string[] {
  const lines = req.headersDistinct['if-none-match'] ?? [];
  return lines.flatMap((line) =>
    line
      .split(',')
      .map((tag) => tag.trim())
      .filter((tag) => tag !== ''),
  );
}

/** The representations the sandbox answers, with their validators and the conditional requests on them. */
export class Representations {
  #settings: ValidatorSettings;
  /** Company and target → the hash of the body last answered, and since when (ms, whole seconds). */
  readonly #pages = new Map<string, { readonly hash: string; readonly since: number }>();

  constructor(settings: ValidatorSettings = ALL_VALIDATORS) {
    this.#settings = settings;
  }

  get settings(): ValidatorSettings {
    return this.#settings;
  }

  set(settings: ValidatorSettings): void {
    this.#settings = settings;
  }

  /**
   * Answers 200 with `value` as JSON and its validators, or 304 when the request's preconditions
   * say the client has it (RFC 9110 §13.2.2: If-None-Match first; If-Modified-Since only without
   * one, and only for GET and HEAD). `page` names the representation: the company and the target;
   * `changedAt`, when live mode knows it (live.ts), when what the page shows last changed.
   */
  answer(req: IncomingMessage, res: ServerResponse, page: string, value: unknown, changedAt?: number): void {
    const body = Buffer.from(JSON.stringify(value));
    const { etag: sendEtag, lastModified: sendLastModified } = this.#settings;
    const hash = createHash('sha256').update(body).digest('hex');
    const tag = `"${hash.slice(0, 32)}"`;
    // HTTP dates are whole seconds (RFC 9110 §5.6.7).
    const since = changedAt === undefined ? this.#lastChange(page, hash) : Math.floor(changedAt / 1000) * 1000;
    const lastModified = new Date(since).toUTCString();
    const headers: Record<string, string> = {};
    if (sendEtag) headers.etag = tag;
    if (sendLastModified) headers['last-modified'] = lastModified;
    if (this.#notModified(req, tag, since)) {
      // RFC 9110 §15.4.5: the ETag a 200 would carry; Last-Modified only without one.
      res.writeHead(304, sendEtag ? { etag: tag } : headers);
      res.end();
      return;
    }
    res.setHeader('content-length', body.length);
    res.writeHead(200, { 'content-type': 'application/json', ...headers });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  /** When the page last changed: now (to the second) if its body is not the one last answered. */
  #lastChange(page: string, hash: string): number {
    const known = this.#pages.get(page);
    if (known !== undefined && known.hash === hash) return known.since;
    const since = Math.floor(Date.now() / 1000) * 1000;
    this.#pages.delete(page);
    this.#pages.set(page, { hash, since });
    if (this.#pages.size > MAX_PAGES) {
      const oldest = this.#pages.keys().next();
      if (oldest.done !== true) this.#pages.delete(oldest.value);
    }
    return since;
  }

  /** RFC 9110 §13.1.2, §13.1.3, with the precedence of §13.2.2; a validator switched off is ignored. */
  #notModified(req: IncomingMessage, tag: string, since: number): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const tags = listedTags(req);
    if (tags.length > 0) {
      if (!this.#settings.etag) return false;
      return tags.includes('*') || tags.some((candidate) => weakMatch(candidate, tag));
    }
    const field = req.headersDistinct['if-modified-since'];
    if (!this.#settings.lastModified || field === undefined || field.length !== 1) return false;
    const date = Date.parse(field[0] ?? '');
    // An invalid date is ignored (§13.1.3): the full answer.
    return !Number.isNaN(date) && since <= date;
  }
}
