/**
 * Revocations (`/admin/revocations`): a token by its `jti` until its `exp`, or every token of a
 * `sub` until the revocation is deleted; listed a page at a time.
 */
import type { IRouter, Request, Response } from 'express';
import { z } from 'zod';
import type { OperatorControl, RevocationKind } from '../../control/operator-control.js';
import { InvalidBodyError, NotFoundError } from '../../errors/proxy-error.js';
import { bodyProblem, noStore, notShared, page, problem } from './operator-io.js';

/** How long a `jti` revocation given without the token's `exp` is kept: 30 days. */
const DEFAULT_REVOCATION_SECONDS = 30 * 86_400;

const jtiRevocation = z.strictObject({ jti: z.string().min(1).max(256), exp: z.number().int().positive().optional() });
const subRevocation = z.strictObject({ sub: z.string().min(1).max(256) });
/** By `sub` when only `sub` is given, else by `jti`: so that an error names the member at fault. */
function parseRevocation(
  body: unknown,
): ReturnType<typeof jtiRevocation.safeParse> | ReturnType<typeof subRevocation.safeParse> {
  const bySub = typeof body === 'object' && body !== null && 'sub' in body && !('jti' in body);
  return bySub ? subRevocation.safeParse(body) : jtiRevocation.safeParse(body);
}

export function revocationRoutes(router: IRouter, control: OperatorControl, now: () => number): void {
  router.get('/admin/revocations', function listRevocations(req: Request, res: Response) {
    const listed = page(control.revocations(), (r) => `${r.kind}/${r.id}`, req.query);
    if (!('items' in listed)) return problem(req, res, listed);
    noStore(res).json(listed);
  });

  router.post('/admin/revocations', async function revoke(req: Request, res: Response) {
    const parsed = parseRevocation(req.body);
    if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
    const body = parsed.data;
    if ('sub' in body) {
      if (!(await control.revoke('sub', body.sub))) return notShared(req, res);
      return void noStore(res).status(201).json({ sub: body.sub });
    }
    const nowSeconds = Math.floor(now() / 1000);
    // A token whose exp has passed is refused anyway: a revocation of it would do nothing.
    if (body.exp !== undefined && body.exp <= nowSeconds)
      return problem(req, res, new InvalidBodyError('#/exp', 'That token has already expired.'));
    // Kept until the token's exp; without one, for the longest a token may reasonably live.
    const until = body.exp ?? nowSeconds + DEFAULT_REVOCATION_SECONDS;
    if (!(await control.revoke('jti', body.jti, until))) return notShared(req, res);
    noStore(res).status(201).json({ jti: body.jti, until });
  });

  router.delete('/admin/revocations/:kind/:id', async function unrevoke(req: Request, res: Response) {
    const kind = String(req.params.kind);
    if (kind !== 'jti' && kind !== 'sub' && kind !== 'digest')
      return problem(req, res, new NotFoundError('Revocations are by jti, sub or digest.'));
    if (!(await control.unrevoke(kind satisfies RevocationKind, String(req.params.id)))) return notShared(req, res);
    res.status(204).end();
  });
}
