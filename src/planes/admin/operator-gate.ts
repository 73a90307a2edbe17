/**
 * What stands in front of the operator API: a bearer token compared in constant time
 * (bearer-digest.ts), the admin token or one of the change feed's (feed-credentials.ts), and
 * bodies that must be JSON (415 otherwise), at most 16 KiB, parsed before the routes see them.
 * The change feed's tokens reach `POST /admin/cache/invalidate` only: every other route is behind
 * `operatorOnly` as well.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import {
  ForbiddenError,
  InvalidBodyError,
  type ProxyError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
} from '../../errors/proxy-error.js';
import { digestIn, presentedDigest, tokenDigest } from './bearer-digest.js';
import type { FeedCredentials } from './feed-credentials.js';
import { problem } from './operator-io.js';

const JSON_TYPES = ['application/json', 'application/*+json'];

/** Who may call the operator API: the holder of `ADMIN_TOKEN`, and the change feed's tokens for invalidations. */
export interface OperatorCredentials {
  /** `ADMIN_TOKEN`: every route; undefined: only the change feed's route is mounted. */
  readonly adminToken: string | undefined;
  /** `INVALIDATE_TOKEN` and `INVALIDATE_TOKEN_FILE`: `POST /admin/cache/invalidate` only. */
  readonly feed: Pick<FeedCredentials, 'accepts'> | undefined;
}

function adminDigests(credentials: OperatorCredentials): Buffer[] {
  return credentials.adminToken === undefined ? [] : [tokenDigest(credentials.adminToken)];
}

/** The middleware in front of every operator route, in order: a token it knows, the body's media type, the body. */
export function operatorGate(credentials: OperatorCredentials): RequestHandler[] {
  const admin = adminDigests(credentials);
  return [
    function requireOperatorToken(req: Request, res: Response, next: NextFunction) {
      const presented = presentedDigest(req.headers.authorization);
      // Both compared, whichever matches: the time says nothing of which kind of token it is.
      const asAdmin = presented !== undefined && digestIn(presented, admin);
      const asFeed = presented !== undefined && credentials.feed?.accepts(presented) === true;
      if (!asAdmin && !asFeed)
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

/**
 * In front of every operator route but the change feed's: the admin token only. The gate above
 * has let through only known tokens, so any other is one of the feed's: a 403 `forbidden`
 * (`reason: permission`), not a 401, as RFC 9110 §15.5.4 has it — the credential is valid and
 * understood, and insufficient for this route; a repeat with the same token will not succeed
 * (RFC 6750 §3.1 `insufficient_scope` in the challenge says the same).
 */
export function operatorOnly(credentials: OperatorCredentials): RequestHandler {
  const admin = adminDigests(credentials);
  return function requireAdminToken(req: Request, res: Response, next: NextFunction) {
    const presented = presentedDigest(req.headers.authorization);
    if (presented === undefined || !digestIn(presented, admin))
      return problem(req, res, new ForbiddenError('permission'));
    next();
  };
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
