/**
 * What the operator routes share: how they answer (a problem+json, `no-store`, a change not yet
 * shared) and how they read what a client sent. A body is checked against a strict zod schema: a
 * bad one is a problem+json 400 `invalid_body` whose `pointer` names the member (RFC 9457 §3). A
 * path or query parameter out of its grammar is a 400 `invalid_parameter` naming it.
 */
import type { Request, Response } from 'express';
import type { z } from 'zod';
import { isTenantText } from '../../auth/claims.js';
import {
  InvalidBodyError,
  InvalidParameterError,
  type ProxyError,
  SharedStateUnavailableError,
} from '../../errors/proxy-error.js';
import { writeProblem } from '../../http/problem.js';
import { requestIdOf } from '../../http/request-id.js';

/** Items per page of a listing, at most and by default. */
const MAX_PAGE = 1_000;
const DEFAULT_PAGE = 100;

export function problem(req: Request, res: Response, error: ProxyError): void {
  writeProblem(res, error, requestIdOf(req));
}

/** A change Redis could not take to the other replicas yet (it applies here): not a success. */
export function notShared(req: Request, res: Response): void {
  problem(req, res, new SharedStateUnavailableError());
}

export function noStore(res: Response): Response {
  return res.set('cache-control', 'no-store');
}

/** The first problem of a zod parse, as `invalid_body` pointing at the member (RFC 6901 escaping). */
export function bodyProblem(error: z.ZodError): InvalidBodyError {
  const issue = error.issues[0];
  const path = issue?.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0] ?? ''] : (issue?.path ?? []);
  const pointer = `#${path.map((part) => `/${String(part).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('')}`;
  const detail =
    issue?.code === 'unrecognized_keys'
      ? 'Unknown member.'
      : issue?.code === 'invalid_type' && issue.input === undefined
        ? 'A required member is missing.'
        : 'Invalid value.';
  return new InvalidBodyError(pointer, detail);
}

/** A company or employee id in a path: the claims' grammar (docs/credentials.md). */
export function companyOf(value: string): string | undefined {
  return isTenantText(value) ? value : undefined;
}

/** A page of a sorted listing: `after` is the last key of the previous page (opaque to clients). */
export function page<T>(
  items: readonly T[],
  keyOf: (item: T) => string,
  query: Request['query'],
): { items: T[]; next: string | null } | ProxyError {
  const limitText = typeof query.limit === 'string' ? query.limit : undefined;
  const limit = limitText === undefined ? DEFAULT_PAGE : Number(limitText);
  if (limitText !== undefined && (!/^[1-9][0-9]{0,3}$/.test(limitText) || limit > MAX_PAGE))
    return new InvalidParameterError('limit', `1 to ${String(MAX_PAGE)}.`);
  let start = 0;
  if (query.after !== undefined) {
    if (typeof query.after !== 'string' || !/^[A-Za-z0-9_-]{1,2048}$/.test(query.after))
      return new InvalidParameterError('after', 'The `next` of the previous page.');
    const after = Buffer.from(query.after, 'base64url').toString('utf8');
    start = items.findIndex((item) => keyOf(item) > after);
    if (start === -1) start = items.length;
  }
  const slice = items.slice(start, start + limit);
  const last = slice.at(-1);
  const more = start + limit < items.length && last !== undefined;
  return { items: slice, next: more ? Buffer.from(keyOf(last), 'utf8').toString('base64url') : null };
}
