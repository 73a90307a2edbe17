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
 * Layout: [u8 version][u8 flags][u32 header length][header JSON][body]
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, gzipSync, constants as zlibConstants } from 'node:zlib';

export const ENTRY_FORMAT_VERSION = 1;
const FLAG_BROTLI = 1;
const PREAMBLE = 6;
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
}

interface Header {
  readonly s: number;
  readonly t: string;
  readonly e: string;
  readonly a: number;
  readonly f: number;
  readonly k: number;
  readonly g: string;
  /** Uncompressed body length: a truncated or corrupt body is caught by it. */
  readonly n: number;
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

export function encodeEntry(entry: CacheEntry): Buffer {
  // An entry made by the fill carries its brotli body (or none, when that would not be smaller).
  const coded = 'brotli' in entry ? entry.brotli : brotliBody(entry.body, entry.etag);
  const body = coded?.body ?? entry.body;
  const flags = coded === undefined ? 0 : FLAG_BROTLI;
  const header: Header = {
    s: entry.status,
    t: entry.contentType,
    e: entry.etag,
    a: entry.storedAt,
    f: entry.freshUntil,
    k: entry.keepUntil,
    g: entry.generation,
    n: entry.body.length,
  };
  const headerBytes = Buffer.from(JSON.stringify(header), 'utf8');
  const out = Buffer.allocUnsafe(PREAMBLE + headerBytes.length + body.length);
  out.writeUInt8(ENTRY_FORMAT_VERSION, 0);
  out.writeUInt8(flags, 1);
  out.writeUInt32BE(headerBytes.length, 2);
  headerBytes.copy(out, PREAMBLE);
  body.copy(out, PREAMBLE + headerBytes.length);
  return out;
}

function isHeader(value: unknown): value is Header {
  if (typeof value !== 'object' || value === null) return false;
  const h = value as Record<string, unknown>;
  return (
    Number.isInteger(h.s) &&
    typeof h.t === 'string' &&
    typeof h.e === 'string' &&
    Number.isFinite(h.a) &&
    Number.isFinite(h.f) &&
    Number.isFinite(h.k) &&
    typeof h.g === 'string' &&
    Number.isInteger(h.n)
  );
}

export function decodeEntry(bytes: Buffer): CacheEntry | undefined {
  if (bytes.length < PREAMBLE || bytes.readUInt8(0) !== ENTRY_FORMAT_VERSION) return undefined;
  const flags = bytes.readUInt8(1);
  const headerLength = bytes.readUInt32BE(2);
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
  return {
    status: header.s,
    contentType: header.t,
    etag: header.e,
    body,
    // The stored bytes themselves: a `br` answer is a slice of what Redis sent.
    brotli: (flags & FLAG_BROTLI) === 0 ? undefined : { coding: 'br', body: stored, etag: codedEtag(header.e, 'br') },
    storedAt: header.a,
    freshUntil: header.f,
    keepUntil: header.k,
    generation: header.g,
  };
}
