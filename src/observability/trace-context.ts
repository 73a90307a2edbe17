/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/), read from a client and written to the
 * upstream: pure functions over header values, no OpenTelemetry import. Every malformed value is
 * ignored, never an error (§3.2.2.1: a vendor that cannot parse `traceparent` starts a new trace,
 * and then MUST ignore `tracestate` too, §3.3.1.1).
 */
import { holdsSecret } from './secrets.js';

export interface TraceParent {
  /** 32 lowercase hex digits, not all zeros. */
  readonly traceId: string;
  /** 16 lowercase hex digits, not all zeros: the client's span, this request's parent. */
  readonly parentId: string;
  /** The trace-flags byte; bit 0 is `sampled` (§3.2.2.5). */
  readonly flags: number;
}

const HEX_LC = /^[0-9a-f]+$/;
const ALL_ZEROS = /^0+$/;
/** `00-` + 32 + `-` + 16 + `-` + 2 (§3.2.2.1). */
const VERSION_00_LENGTH = 55;

function hexField(value: string, length: number): boolean {
  return value.length === length && HEX_LC.test(value) && !ALL_ZEROS.test(value);
}

/**
 * A client's `traceparent` (§3.2). Node joins repeated headers with `, `, which no valid value can
 * hold: two `traceparent` headers are therefore ignored, as §3.2.1 wants for more than one.
 *
 * - version: two lowercase hex digits, `ff` invalid (§3.2.2.2);
 * - version `00`: exactly 55 characters (§3.2.2.1);
 * - a higher version: the same first 55 characters, then the end or a `-` (§3.2.4, "Versioning");
 * - trace-id and parent-id: lowercase hex, not all zeros (§3.2.2.3, §3.2.2.4);
 * - trace-flags: two lowercase hex digits (§3.2.2.5).
 */
export function parseTraceparent(value: string | string[] | undefined): TraceParent | undefined {
  if (typeof value !== 'string' || value.length < VERSION_00_LENGTH) return undefined;
  const version = value.slice(0, 2);
  if (!HEX_LC.test(version) || version === 'ff') return undefined;
  if (version === '00' ? value.length !== VERSION_00_LENGTH : value.length > VERSION_00_LENGTH && value[55] !== '-')
    return undefined;
  if (value[2] !== '-' || value[35] !== '-' || value[52] !== '-') return undefined;
  const traceId = value.slice(3, 35);
  const parentId = value.slice(36, 52);
  const flags = value.slice(53, 55);
  if (!hexField(traceId, 32) || !hexField(parentId, 16) || !(flags.length === 2 && HEX_LC.test(flags)))
    return undefined;
  return { traceId, parentId, flags: Number.parseInt(flags, 16) };
}

/** The W3C fields one upstream request carries. */
export interface TraceFields {
  readonly traceparent: string;
  readonly tracestate: string | undefined;
}

/**
 * A client's trace context to pass on upstream unchanged while this process exports no spans (issue
 * 17; W3C Trace Context §3: an intermediary that does not take part in the trace forwards both
 * fields, so a traced client and a traced system of record stay in one trace). Only a `traceparent`
 * that parses is passed on — one that cannot be parsed would start no trace upstream either — and
 * its `tracestate` as `parseTracestate` keeps it (never a value that holds a credential).
 */
export function clientTraceFields(
  traceparent: string | string[] | undefined,
  tracestate: string | string[] | undefined,
): TraceFields | undefined {
  if (typeof traceparent !== 'string' || parseTraceparent(traceparent) === undefined) return undefined;
  return { traceparent, tracestate: parseTracestate(tracestate) };
}

/** The `traceparent` this process sends for one of its spans: version 00, the sampled bit only (§3.2.2.5). */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
}

/** §3.3.1.3: `simple-key` or `tenant-id@system-id`. */
const KEY = /^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})$/;
/** §3.3.1.4: up to 256 printable ASCII characters but `,` and `=`, not ending in a space. */
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
/** §3.3.1.1: at most 32 list-members. */
const MAX_MEMBERS = 32;
/** §3.3.1.5: at least 512 characters are propagated; longer lists are cut as below. */
const MAX_LENGTH = 512;
const LONG_MEMBER = 128;

/**
 * A client's `tracestate` (§3.3), to keep beside its `traceparent` and pass on upstream, or
 * `undefined`. Repeated headers arrive joined with `,` (Node), which is how §3.3.1.1 combines them.
 * The whole value is dropped when it cannot be parsed — a malformed member, a duplicate key, more
 * than 32 members — as §3.3.1.1 allows, and also when any value holds a token: the proxy forwards
 * no client text that could carry a credential (the rule `X-Request-Id` follows), and this value
 * would also be exported with the trace. Over 512 characters, members longer than 128 go first,
 * then members from the end (§3.3.1.5).
 */
export function parseTracestate(value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string' || value.length > MAX_LENGTH * 8) return undefined;
  const members: string[] = [];
  const keys = new Set<string>();
  for (const raw of value.split(',')) {
    const member = raw.trim();
    // Empty list-members (OWS only) are allowed and ignored (§3.3.1.1).
    if (member === '') continue;
    const equals = member.indexOf('=');
    if (equals === -1) return undefined;
    const key = member.slice(0, equals);
    const memberValue = member.slice(equals + 1);
    if (!KEY.test(key) || !VALUE.test(memberValue) || keys.has(key)) return undefined;
    if (holdsSecret(memberValue)) return undefined;
    keys.add(key);
    members.push(member);
  }
  if (members.length === 0 || members.length > MAX_MEMBERS) return undefined;
  let kept = members;
  const length = (list: readonly string[]): number => list.join(',').length;
  if (length(kept) > MAX_LENGTH) kept = kept.filter((member) => member.length <= LONG_MEMBER);
  while (kept.length > 0 && length(kept) > MAX_LENGTH) kept = kept.slice(0, -1);
  return kept.length === 0 ? undefined : kept.join(',');
}
