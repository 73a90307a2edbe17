/** A read as the data plane hands it to the read service: a canonical target under the operations API, for a principal. */
import type { Principal } from '../../src/auth/principal.js';
import type { ReadRequest } from '../../src/cache/read/origin.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { canonicaliseTarget } from './canonicalise.js';
import { testPrincipal } from './principals.js';

/** `target` is the path and query after `/api/slab/v1/operations/`, e.g. `receipts?per_page=2`. */
export function readRequest(target: string, principal: Principal = testPrincipal(), token = 'a-token'): ReadRequest {
  const read = canonicaliseTarget(`/api/slab/v1/operations/${target}`);
  if (read instanceof ProxyError) throw new Error(read.code);
  return { read, principal, token, requestId: 'req-1' };
}
