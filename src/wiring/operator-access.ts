/**
 * Who may call the operator API (docs/operations.md#the-operator-api): the admin token, and the
 * change feed's tokens (docs/operations.md#the-change-feed), whose file is read now — a bad one
 * stops the start before anything else is built — and looked at until the shutdown.
 */
import { FeedCredentials } from '../planes/admin/feed-credentials.js';
import type { OperatorCredentials } from '../planes/admin/operator-gate.js';
import type { Foundation } from './foundation.js';

export interface OperatorAccess {
  readonly credentials: OperatorCredentials;
  /** The change feed's tokens; undefined when neither `INVALIDATE_TOKEN` nor `INVALIDATE_TOKEN_FILE` is set. */
  readonly feed: FeedCredentials | undefined;
  /** Whether the admin port serves the operator API at all (either kind of token set). */
  readonly enabled: boolean;
}

export function wireOperatorAccess({ options, logger, closers }: Foundation): OperatorAccess {
  const { adminToken, invalidateToken, invalidateTokenFile } = options;
  const feed =
    invalidateToken === undefined && invalidateTokenFile === undefined
      ? undefined
      : new FeedCredentials({ token: invalidateToken, file: invalidateTokenFile, log: logger });
  if (feed !== undefined) closers.add('invalidate token file', () => feed.close());
  return { credentials: { adminToken, feed }, feed, enabled: adminToken !== undefined || feed !== undefined };
}
