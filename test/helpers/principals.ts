/**
 * A verified principal for tests that need one without a token (the cache, the limits, the
 * guard): the fields a verified token gives, with the defaults of a reader of company 1; each test
 * sets what it is about.
 */
import type { Principal } from '../../src/auth/principal.js';

export function testPrincipal(fields: Partial<Principal> = {}): Principal {
  const subject = fields.subject ?? 'reader';
  return {
    company: '1',
    credential: `sub:${subject}`,
    subject,
    tokenId: undefined,
    permissions: new Set(['view_slab', 'view_slab_logistics']),
    employee: undefined,
    scope: undefined,
    modules: undefined,
    expiresAt: Date.now() / 1000 + 3600,
    tokenDigest: 'digest-of-a-token',
    ...fields,
  };
}
