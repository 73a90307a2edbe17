/**
 * Cache entries and their stored form (DESIGN §6, after Kong's versioned entries): status,
 * content type, strong ETag, stored-at, fresh-until, keep-until ("fresh for" apart from "kept for"),
 * the purge generation it was filled under, and the body, brotli-compressed when that is smaller.
 * A corrupt, truncated or other-version entry decodes to `undefined`: a miss that the next fill
 * replaces.
 *
 * Layout: [u8 version][u8 flags][u32 header length][header JSON][body]
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants as zlibConstants } from 'node:zlib';

export const ENTRY_FORMAT_VERSION = 1;
const FLAG_BROTLI = 1;
const PREAMBLE = 6;
/** Below this, compression rarely pays for its header. */
const MIN_COMPRESSIBLE = 256;

export interface CacheEntry {
  /** 200, or 404 for a single record. */
  readonly status: number;
  readonly contentType: string;
  /** Strong validator, quoted (RFC 9110 §8.8.3). */
  readonly etag: string;
  readonly body: Buffer;
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

export function encodeEntry(entry: CacheEntry): Buffer {
  let body = entry.body;
  let flags = 0;
  if (body.length >= MIN_COMPRESSIBLE) {
    const compressed = brotliCompressSync(body, {
      params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 4, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: body.length },
    });
    if (compressed.length < body.length) {
      body = compressed;
      flags |= FLAG_BROTLI;
    }
  }
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
  let body = bytes.subarray(PREAMBLE + headerLength);
  if ((flags & FLAG_BROTLI) !== 0) {
    try {
      body = brotliDecompressSync(body, { maxOutputLength: header.n + 1 });
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
    storedAt: header.a,
    freshUntil: header.f,
    keepUntil: header.k,
    generation: header.g,
  };
}
