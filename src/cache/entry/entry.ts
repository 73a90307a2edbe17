/**
 * Cache entries and their stored form (docs/cache.md, after Kong's versioned entries): status,
 * content type, strong ETag, stored-at, fresh-until, keep-until ("fresh for" apart from "kept for"),
 * the purge generation it was filled under, and the body, brotli-compressed when that is smaller.
 * A corrupt, truncated or other-version entry decodes to `undefined`: a miss that the next fill
 * replaces.
 *
 * The compressed body is compressed once, when the entry is made, and kept beside the decoded one
 * (`brotli`): it is what the store keeps, and what a client that accepts `br` is sent as it is
 * (docs/clients.md#content-coding), so neither a save nor a `br` hit compresses anything.
 *
 * The upstream's own validators (`ETag`, `Last-Modified`) are kept beside the entry's, for the
 * conditional request of its next refresh (docs/cache.md#revalidation); the entry's own `etag`, the
 * one clients see, is always the proxy's hash of the body, so a revalidation that keeps the body
 * keeps the clients' validator too.
 *
 * Layout (format 2): [u8 version][u8 flags][f64 storedAt][f64 freshUntil][f64 keepUntil]
 * [u32 header length][header JSON][body]. The three times have a fixed place and width, so a
 * freshen (a 304, or a refresh whose body is the same) rewrites those 24 bytes in the store and
 * nothing else (RFC 9111 §4.3.4: the stored response is updated, its body kept).
 *
 * Flags: 1, the body is stored in brotli; 2, a page fetched ahead that no request has taken yet
 * (docs/cache.md#prefetch): the first request of any replica to take it clears the flag in the
 * store, so that a page is counted used once in the fleet. A reader that knows only the first
 * flag ignores the second.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, gzipSync, constants as zlibConstants } from 'node:zlib';
import type { PageWindow } from './page-window.js';

export const ENTRY_FORMAT_VERSION = 2;
const FLAG_BROTLI = 1;
export const FLAG_AHEAD = 2;
/** Where the flags byte is. */
export const FLAGS_OFFSET = 1;
/** Where the fixed-width freshness block (three f64 times) starts, and its width. */
export const TIMES_OFFSET = 2;
export const TIMES_BYTES = 24;
const HEADER_LENGTH_OFFSET = TIMES_OFFSET + TIMES_BYTES;
const PREAMBLE = HEADER_LENGTH_OFFSET + 4;
/** Below this, compression rarely pays for its header. */
const MIN_COMPRESSIBLE = 256;

/**
 * The body in a content coding (RFC 9110 §8.4.1): another representation, so another strong
 * validator (§8.8.3): the identity tag with the coding's suffix after a dot, which base64url tags
 * never contain.
 */
export interface CodedBody {
  readonly coding: 'br' | 'gzip';
  readonly body: Buffer;
  readonly etag: string;
}

export interface CacheEntry {
  /** 200, or 404 for a single record. */
  readonly status: number;
  readonly contentType: string;
  /** Strong validator of the identity body, quoted (RFC 9110 §8.8.3). */
  readonly etag: string;
  /** The identity body: the upstream's bytes. */
  readonly body: Buffer;
  /** The body in brotli, when that is smaller (what the store keeps); made once, never per hit. */
  readonly brotli?: CodedBody | undefined;
  /** Milliseconds since the epoch. */
  readonly storedAt: number;
  readonly freshUntil: number;
  readonly keepUntil: number;
  /** The group's purge generation when the upstream was asked. */
  readonly generation: string;
  /**
   * The upstream's `ETag` and `Last-Modified`, as it sent them (when well formed): what the next
   * refresh sends as `If-None-Match` and `If-Modified-Since` (RFC 9111 §4.3.1). Never sent to clients.
   */
  readonly upstreamEtag?: string | undefined;
  readonly lastModified?: string | undefined;
  /** Fetched ahead of a walker (a prefetch) and, as far as this copy knows, taken by no request yet. */
  readonly ahead?: boolean | undefined;
  /**
   * The page's invalidation marks when the upstream was asked (docs/cache.md#soft-invalidation);
   * absent when it had none. Marks set since make the entry stale, not a miss.
   */
  readonly mark?: string | undefined;
  /**
   * The page's own lifetime, ms, for a resource with automatic lifetimes (auto-lifetime.ts): from
   * what its fills found; its `freshUntil` is `storedAt` plus this, under the ceiling's grant.
   */
  readonly autoLifetimeMs?: number | undefined;
  /**
   * The keyset window of a list page that keeps the keyset rule (page-window.ts): only a change of
   * a record it can hold makes it stale. Absent for a record page, and for a list page that broke
   * the rule.
   */
  readonly window?: PageWindow | undefined;
  /**
   * When the page was invalidated, for an entry served as of marks set after its fill
   * (marks.ts, `asOfMarks`): it is stale from then. Never stored.
   */
  readonly invalidatedAt?: number | undefined;
}

interface Header {
  readonly s: number;
  readonly t: string;
  readonly e: string;
  readonly g: string;
  /** Uncompressed body length: a truncated or corrupt body is caught by it. */
  readonly n: number;
  /** The upstream's ETag and Last-Modified, when it sent them. */
  readonly ue?: string;
  readonly lm?: string;
  /** The invalidation marks the entry was filled under. */
  readonly k?: string;
  /** The page's automatic lifetime, ms. */
  readonly al?: number;
  /** A list page's keyset window: its cursor, its last id (null when empty), 1 when it has more. */
  readonly w?: readonly [number, number | null, 0 | 1];
}

/** A strong ETag from the body bytes: the same bytes always give the same tag, on every replica. */
export function strongEtag(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}

function codedEtag(etag: string, coding: CodedBody['coding']): string {
  return `${etag.slice(0, -1)}.${coding}"`;
}

/**
 * The body in brotli when that pays (quality 4: a 30-record page to about 0.16× its JSON, in well
 * under a millisecond), else `undefined`. Called once per entry, when it is filled.
 */
export function brotliBody(body: Buffer, etag: string): CodedBody | undefined {
  if (body.length < MIN_COMPRESSIBLE) return undefined;
  const compressed = brotliCompressSync(body, {
    params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 4, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });
  return compressed.length < body.length ? { coding: 'br', body: compressed, etag: codedEtag(etag, 'br') } : undefined;
}

/**
 * Gzip bodies, made at the first request that needs one and kept as long as the identity body
 * they came from is held (keyed by that Buffer, which every copy of an entry shares). Not stored:
 * brotli is what the store keeps; gzip is for clients that do not accept br.
 */
const gzipped = new WeakMap<Buffer, CodedBody>();

export function gzipBody(body: Buffer, etag: string): CodedBody {
  let coded = gzipped.get(body);
  if (coded === undefined) {
    coded = { coding: 'gzip', body: gzipSync(body), etag: codedEtag(etag, 'gzip') };
    gzipped.set(body, coded);
  }
  return coded;
}

/** The bytes an entry holds in memory: both bodies (for the L1's and the memory store's bounds). */
export function entryBytes(entry: CacheEntry): number {
  return entry.body.length + (entry.brotli?.body.length ?? 0);
}

/** The stored form of an entry's body: its brotli form when it has one (made at the fill), else itself. */
function storedBody(entry: CacheEntry): CodedBody | undefined {
  // An entry made by the fill carries its brotli body (or none, when that would not be smaller).
  return 'brotli' in entry ? entry.brotli : brotliBody(entry.body, entry.etag);
}

/**
 * The header JSON, its fields always in this order: a freshen compares stored bytes with the
 * bytes this writes for the entry it read (src/cache/stores/redis-store.ts), so one entry has one form.
 */
function headerBytes(entry: CacheEntry): Buffer {
  const header: Header = {
    s: entry.status,
    t: entry.contentType,
    e: entry.etag,
    g: entry.generation,
    n: entry.body.length,
    ...(entry.upstreamEtag !== undefined && { ue: entry.upstreamEtag }),
    ...(entry.lastModified !== undefined && { lm: entry.lastModified }),
    ...(entry.mark !== undefined && entry.mark !== '' && { k: entry.mark }),
    ...(entry.autoLifetimeMs !== undefined && { al: entry.autoLifetimeMs }),
    ...(entry.window !== undefined && {
      w: [entry.window.after, entry.window.last ?? null, entry.window.more ? 1 : 0] as const,
    }),
  };
  return Buffer.from(JSON.stringify(header), 'utf8');
}

/** The preamble and the header: everything of the stored form but the body. */
function encodePrefix(entry: CacheEntry, brotli: boolean, header: Buffer): Buffer {
  const out = Buffer.allocUnsafe(PREAMBLE + header.length);
  out.writeUInt8(ENTRY_FORMAT_VERSION, 0);
  out.writeUInt8((brotli ? FLAG_BROTLI : 0) | (entry.ahead === true ? FLAG_AHEAD : 0), FLAGS_OFFSET);
  writeTimes(out, entry);
  out.writeUInt32BE(header.length, HEADER_LENGTH_OFFSET);
  header.copy(out, PREAMBLE);
  return out;
}

function writeTimes(out: Buffer, entry: CacheEntry, at = TIMES_OFFSET): void {
  out.writeDoubleBE(entry.storedAt, at);
  out.writeDoubleBE(entry.freshUntil, at + 8);
  out.writeDoubleBE(entry.keepUntil, at + 16);
}

export function encodeEntry(entry: CacheEntry): Buffer {
  const coded = storedBody(entry);
  const body = coded?.body ?? entry.body;
  const prefix = encodePrefix(entry, coded !== undefined, headerBytes(entry));
  const out = Buffer.allocUnsafe(prefix.length + body.length);
  prefix.copy(out, 0);
  body.copy(out, prefix.length);
  return out;
}

/**
 * The stored prefix (preamble and header) of each entry: for one decoded from stored bytes, exactly
 * as it was read (a freshen compares against what the store held, not against a re-encoding); for
 * any other, as `encodeEntry` writes it, made once (an L1 copy is confirmed by it once per L1
 * lifetime: src/cache/stores/redis-store.ts).
 */
const prefixes = new WeakMap<CacheEntry, Buffer>();

/**
 * The preamble and header of an entry's stored form: as read from the store for an entry decoded
 * from it, else as `encodeEntry` writes them.
 */
export function storedPrefix(entry: CacheEntry): Buffer {
  let prefix = prefixes.get(entry);
  if (prefix === undefined) {
    prefix = encodePrefix(entry, storedBody(entry) !== undefined, headerBytes(entry));
    prefixes.set(entry, prefix);
  }
  return prefix;
}

/**
 * Whether `fresher` is `stored` freshened (RFC 9111 §4.3.4): the same response and body, the same
 * stored form, only its times, the upstream's validators and its invalidation marks new. What a
 * store's `freshen` takes.
 */
export function isRevalidated(stored: CacheEntry, fresher: CacheEntry): boolean {
  return (
    fresher.status === stored.status &&
    fresher.contentType === stored.contentType &&
    fresher.etag === stored.etag &&
    fresher.generation === stored.generation &&
    fresher.body.length === stored.body.length &&
    (fresher.brotli === undefined) === (stored.brotli === undefined)
  );
}

/**
 * How to turn the stored form of `stored` into that of `fresher` in place: the 24-byte freshness
 * block at its fixed offset when the header is unchanged (the usual case), else the whole prefix
 * (`offset` 0 when it keeps its length; `undefined` when the body must move behind a new one).
 */
export function revalidationPatch(
  stored: CacheEntry,
  fresher: CacheEntry,
): { readonly expected: Buffer; readonly bytes: Buffer; readonly offset: number | undefined } {
  // The flag of a page fetched ahead is not part of what is compared: a request taking the page
  // clears it in the store, which changes nothing of the response (the store masks it too).
  const expected = Buffer.from(storedPrefix(stored));
  expected.writeUInt8(expected.readUInt8(FLAGS_OFFSET) & ~FLAG_AHEAD, FLAGS_OFFSET);
  const header = headerBytes(fresher);
  if (header.equals(expected.subarray(PREAMBLE))) {
    const times = Buffer.allocUnsafe(TIMES_BYTES);
    writeTimes(times, fresher, 0);
    return { expected, bytes: times, offset: TIMES_OFFSET };
  }
  const prefix = encodePrefix(fresher, (expected.readUInt8(FLAGS_OFFSET) & FLAG_BROTLI) !== 0, header);
  return { expected, bytes: prefix, offset: prefix.length === expected.length ? 0 : undefined };
}

/**
 * Whether two entries are one stored entry: one fill's, not freshened since (every field of the
 * stored prefix alike; the body is that fill's, named by its hash and length).
 */
export function sameStoredEntry(a: CacheEntry, b: CacheEntry): boolean {
  return (
    a === b ||
    (a.storedAt === b.storedAt &&
      a.freshUntil === b.freshUntil &&
      a.keepUntil === b.keepUntil &&
      a.etag === b.etag &&
      a.generation === b.generation &&
      a.status === b.status &&
      a.contentType === b.contentType &&
      a.body.length === b.body.length &&
      a.upstreamEtag === b.upstreamEtag &&
      a.lastModified === b.lastModified &&
      (a.mark ?? '') === (b.mark ?? '') &&
      a.autoLifetimeMs === b.autoLifetimeMs &&
      sameWindow(a.window, b.window))
  );
}

function sameWindow(a: PageWindow | undefined, b: PageWindow | undefined): boolean {
  return (
    a === b || (a !== undefined && b !== undefined && a.after === b.after && a.last === b.last && a.more === b.more)
  );
}

function isStoredWindow(value: unknown): value is Header['w'] {
  if (!Array.isArray(value) || value.length !== 3) return false;
  const [after, last, more] = value as unknown[];
  return Number.isSafeInteger(after) && (last === null || Number.isSafeInteger(last)) && (more === 0 || more === 1);
}

function windowOf(stored: NonNullable<Header['w']>): PageWindow {
  return { after: stored[0], last: stored[1] ?? undefined, more: stored[2] === 1 };
}

function isHeader(value: unknown): value is Header {
  if (typeof value !== 'object' || value === null) return false;
  const h = value as Record<string, unknown>;
  return (
    Number.isInteger(h.s) &&
    typeof h.t === 'string' &&
    typeof h.e === 'string' &&
    typeof h.g === 'string' &&
    Number.isInteger(h.n) &&
    (h.ue === undefined || typeof h.ue === 'string') &&
    (h.lm === undefined || typeof h.lm === 'string') &&
    (h.k === undefined || typeof h.k === 'string') &&
    (h.al === undefined || (Number.isInteger(h.al) && Number(h.al) >= 0)) &&
    (h.w === undefined || isStoredWindow(h.w))
  );
}

export function decodeEntry(bytes: Buffer): CacheEntry | undefined {
  if (bytes.length < PREAMBLE || bytes.readUInt8(0) !== ENTRY_FORMAT_VERSION) return undefined;
  const flags = bytes.readUInt8(FLAGS_OFFSET);
  const storedAt = bytes.readDoubleBE(TIMES_OFFSET);
  const freshUntil = bytes.readDoubleBE(TIMES_OFFSET + 8);
  const keepUntil = bytes.readDoubleBE(TIMES_OFFSET + 16);
  if (!(Number.isFinite(storedAt) && Number.isFinite(freshUntil) && Number.isFinite(keepUntil))) return undefined;
  const headerLength = bytes.readUInt32BE(HEADER_LENGTH_OFFSET);
  if (PREAMBLE + headerLength > bytes.length) return undefined;
  let header: unknown;
  try {
    header = JSON.parse(bytes.subarray(PREAMBLE, PREAMBLE + headerLength).toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isHeader(header)) return undefined;
  const stored = bytes.subarray(PREAMBLE + headerLength);
  let body = stored;
  if ((flags & FLAG_BROTLI) !== 0) {
    try {
      body = brotliDecompressSync(stored, { maxOutputLength: header.n + 1 });
    } catch {
      return undefined;
    }
  }
  if (body.length !== header.n) return undefined;
  const entry: CacheEntry = {
    status: header.s,
    contentType: header.t,
    etag: header.e,
    body,
    // The stored bytes themselves: a `br` answer is a slice of what Redis sent.
    brotli: (flags & FLAG_BROTLI) === 0 ? undefined : { coding: 'br', body: stored, etag: codedEtag(header.e, 'br') },
    storedAt,
    freshUntil,
    keepUntil,
    generation: header.g,
    ...(header.ue !== undefined && { upstreamEtag: header.ue }),
    ...(header.lm !== undefined && { lastModified: header.lm }),
    ...(header.k !== undefined && { mark: header.k }),
    ...(header.al !== undefined && { autoLifetimeMs: header.al }),
    ...(header.w !== undefined && { window: windowOf(header.w) }),
    ...((flags & FLAG_AHEAD) !== 0 && { ahead: true }),
  };
  // A view of the bytes read (no copy): the body's own slice keeps them alive anyway.
  prefixes.set(entry, bytes.subarray(0, PREAMBLE + headerLength));
  return entry;
}
