/**
 * The admin port's bearer tokens, compared in constant time in their content: both sides are
 * hashed to one length (SHA-256) before `timingSafeEqual`, so the comparison's time says nothing
 * of a token's length or of how much of a guess was right.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export function tokenDigest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** The digest of the token an `Authorization: Bearer …` header carries (RFC 6750 §2.1); undefined without one. */
export function presentedDigest(header: string | undefined): Buffer | undefined {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  return match?.[1] === undefined ? undefined : tokenDigest(match[1]);
}

/** Whether `presented` is one of `expected`: each is compared, so which one matched takes no less time. */
export function digestIn(presented: Buffer, expected: Iterable<Buffer>): boolean {
  let found = false;
  for (const digest of expected) found = timingSafeEqual(presented, digest) || found;
  return found;
}
