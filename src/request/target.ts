/**
 * Classifies the raw request target before anything else looks at it. Node's parser hands
 * absolute-form targets and `//host/...` paths to `req.url` unchanged, and `new URL(req.url, base)`
 * then points at another host (docs/architecture.md#nodes-http-parser): both are refused outright.
 */
import { API_PREFIX } from '../catalog/resources.js';

export type TargetClass =
  /** Not origin-form, or a path that a URL parser would read as another authority. */
  | { readonly kind: 'invalid' }
  /** Under the API prefix: `path` is what follows `<prefix>/`, `rawQuery` what follows `?`. */
  | { readonly kind: 'api'; readonly path: string; readonly rawQuery: string }
  /** Anything else in origin-form (or `*`): the fallback plane decides. */
  | { readonly kind: 'other' };

const API_PATH_START = `${API_PREFIX}/`;
const INVALID: TargetClass = { kind: 'invalid' };
const OTHER: TargetClass = { kind: 'other' };

export function classifyTarget(url: string): TargetClass {
  if (url === '*') return OTHER; // asterisk-form (RFC 9112 §3.2.4), only for server-wide OPTIONS
  if (url.charCodeAt(0) !== 0x2f /* / */) return INVALID; // absolute-form or authority-form
  const second = url.charCodeAt(1);
  // `//evil.example/x` and `/\evil.example/x` are network-path references to a URL parser.
  if (second === 0x2f || second === 0x5c /* \ */) return INVALID;
  if (!url.startsWith(API_PATH_START)) return OTHER;
  const queryAt = url.indexOf('?', API_PATH_START.length);
  return queryAt === -1
    ? { kind: 'api', path: url.slice(API_PATH_START.length), rawQuery: '' }
    : { kind: 'api', path: url.slice(API_PATH_START.length, queryAt), rawQuery: url.slice(queryAt + 1) };
}
