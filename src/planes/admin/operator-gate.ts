/**
 * What stands in front of the operator API: the admin bearer token, compared in constant time,
 * and bodies that must be JSON (415 otherwise), at most 16 KiB, parsed before the routes see them.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import {
  InvalidBodyError,
  type ProxyError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
} from '../../errors/proxy-error.js';
import { problem } from './operator-io.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Constant time in the token's content: both sides are hashed to one length first. */
function tokenMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected);
}

/** The middleware of the operator API, in order: the token, the body's media type, the body. */
export function operatorGate(token: string): RequestHandler[] {
  const expected = digest(token);
  return [
    function requireAdminToken(req: Request, res: Response, next: NextFunction) {
      if (!tokenMatches(req.headers.authorization, expected))
        return problem(
          req,
          res,
          new UnauthenticatedError(req.headers.authorization === undefined ? 'missing' : 'signature'),
        );
      next();
    },
    function requireJson(req: Request, res: Response, next: NextFunction) {
      // A body must say it is JSON; one sent as a form or as text would otherwise arrive empty and
      // be blamed on a missing member (RFC 9110 §15.5.16).
      const hasBody =
        req.headers['content-length'] !== undefined
          ? req.headers['content-length'] !== '0'
          : req.headers['transfer-encoding'] !== undefined;
      if (hasBody && !req.is(JSON_TYPES)) return problem(req, res, new UnsupportedMediaTypeError());
      next();
    },
    express.json({ limit: '16kb', strict: false, type: JSON_TYPES }),
  ];
}

/** The problem for an error of the body parser above; undefined for any other error. */
export function bodyParserProblem(error: unknown): ProxyError | undefined {
  const type = typeof error === 'object' && error !== null && 'type' in error ? error.type : undefined;
  return type === 'entity.parse.failed'
    ? new InvalidBodyError('#', 'The body is not JSON.')
    : type === 'entity.too.large'
      ? new InvalidBodyError('#', 'The body is over 16 KiB.')
      : type === 'encoding.unsupported' || type === 'charset.unsupported'
        ? new UnsupportedMediaTypeError()
        : undefined;
}
