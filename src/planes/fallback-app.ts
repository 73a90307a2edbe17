/**
 * The fallback plane: Express, for every request the data plane does not take. With the
 * pass-through on, those go to the upstream untouched; otherwise they are a 404. Express alone costs
 * several times a cache hit (docs/architecture.md#what-a-request-costs), which is why it is never
 * on the path of the 26 reads.
 */
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { RequestHandler } from 'http-proxy-middleware';
import { InternalError, NotFoundError } from '../errors/proxy-error.js';
import type { HttpLog } from '../http/http-log.js';
import { writeProblem } from '../http/problem.js';
import { requestIdOf } from '../http/request-id.js';

/** `log`: the request line (docs/operations.md#logs); first, so that every answer below gets one. */
export function createFallbackApp(passthrough: RequestHandler | undefined, log?: HttpLog): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  if (log !== undefined) app.use(log);
  if (passthrough !== undefined) app.use(passthrough);
  app.use(function notFound(req: Request, res: Response) {
    writeProblem(res, new NotFoundError(), requestIdOf(req), { head: req.method === 'HEAD' });
  });
  app.use(function onError(_error: unknown, req: Request, res: Response, _next: NextFunction) {
    if (res.headersSent) return void res.destroy();
    writeProblem(res, new InternalError(), requestIdOf(req));
  });
  return app;
}
