/**
 * The admin plane on `ADMIN_PORT` (docs/operations.md#the-operator-api). Liveness, readiness, metrics and the
 * client surface's OpenAPI description always; with `ADMIN_TOKEN` set, the operator API behind a
 * bearer token compared in constant time: the effective settings, run-time TTL overrides, purges,
 * revocations and blocks, each shared with every replica, and the lists of what is in force.
 * Bodies must be JSON (415 otherwise) and are checked against a strict schema: a bad one is a
 * problem+json 400 `invalid_body` whose `pointer` names the member (RFC 9457 §3).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { isTenantText } from '../auth/claims.js';
import { RESOURCE_NAMES, isResourceName } from '../catalog/resources.js';
import type { CachePolicies } from '../cache/policy.js';
import type { ReadService } from '../cache/read-service.js';
import type { FileConfig } from '../config/schema.js';
import type { OperatorControl, RevocationKind } from '../control/operator-control.js';
import { ttlOverrideSchema } from '../control/operator-state.js';
import {
  InternalError,
  InvalidBodyError,
  InvalidParameterError,
  NotFoundError,
  type ProxyError,
  SharedStateUnavailableError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
} from '../errors/proxy-error.js';
import { writeProblem } from '../http/problem.js';
import { requestIdOf } from '../http/request-id.js';
import { METRICS_CONTENT_TYPE, type Metrics } from '../observability/metrics.js';
import { renderOpenApi } from '../docs/openapi.js';

export type Phase = 'starting' | 'ready' | 'unconfirmed' | 'stale' | 'draining';

export interface Readiness {
  /** Ready only between the end of the start and the beginning of a drain (and, when the config asks, while the operator state is current). */
  phase(): Phase;
  /** Component states for the body, e.g. `{ upstream: 'ok' }`. */
  components(): Record<string, unknown>;
}

export interface OperatorApi {
  readonly token: string;
  readonly config: () => FileConfig;
  readonly policies: CachePolicies;
  readonly reads: ReadService;
  readonly control: OperatorControl;
  readonly now?: () => number;
}

export interface AdminAppOptions {
  readonly readiness: Readiness;
  readonly metrics: Pick<Metrics, 'render'>;
  /** The operator API; without it only `/healthz`, `/readyz`, `/metrics` and `/openapi.json` exist. */
  readonly operator?: OperatorApi | undefined;
  /** The request log middleware (pino-http), first in line. */
  readonly log?: ((req: Request, res: Response, next: NextFunction) => void) | undefined;
}

/** How long a `jti` revocation given without the token's `exp` is kept: 30 days. */
const DEFAULT_REVOCATION_SECONDS = 30 * 86_400;

const companyId = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String),
  z.string().refine(isTenantText),
]);
const jtiRevocation = z.strictObject({ jti: z.string().min(1).max(256), exp: z.number().int().positive().optional() });
const subRevocation = z.strictObject({ sub: z.string().min(1).max(256) });
/** By `sub` when only `sub` is given, else by `jti`: so that an error names the member at fault. */
function parseRevocation(
  body: unknown,
): ReturnType<typeof jtiRevocation.safeParse> | ReturnType<typeof subRevocation.safeParse> {
  const bySub = typeof body === 'object' && body !== null && 'sub' in body && !('jti' in body);
  return bySub ? subRevocation.safeParse(body) : jtiRevocation.safeParse(body);
}
const purgeBody = z.strictObject({ company_id: companyId, resource: z.string().optional() });

/** Items per page of a listing, at most and by default. */
const MAX_PAGE = 1_000;
const DEFAULT_PAGE = 100;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Constant time in the token's content: both sides are hashed to one length first. */
function tokenMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected);
}

/** A company or employee id in a path: the claims' grammar (docs/credentials.md). */
function companyOf(value: string): string | undefined {
  return isTenantText(value) ? value : undefined;
}

/** The first problem of a zod parse, as `invalid_body` pointing at the member (RFC 6901 escaping). */
function bodyProblem(error: z.ZodError): InvalidBodyError {
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

/** A page of a sorted listing: `after` is the last key of the previous page (opaque to clients). */
function page<T>(
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

export function createAdminApp(options: AdminAppOptions): Express {
  const { readiness, metrics, operator } = options;
  const app = express();
  app.disable('x-powered-by');
  if (options.log !== undefined) app.use(options.log);
  app.get('/healthz', function healthz(_req: Request, res: Response) {
    res.set('cache-control', 'no-store').json({ status: 'ok' });
  });
  app.get('/readyz', function readyz(_req: Request, res: Response) {
    // A degraded component (Redis down, the breaker open) is still 200: the replica serves.
    const phase = readiness.phase();
    res
      .status(phase === 'ready' ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: phase, ...readiness.components() });
  });

  app.get('/metrics', async function prometheusMetrics(_req: Request, res: Response) {
    const text = await metrics.render();
    res.status(200).set('content-type', METRICS_CONTENT_TYPE).set('cache-control', 'no-store').send(text);
  });

  // The client surface's OpenAPI description (docs/clients.md), public like /metrics.
  const openApi = renderOpenApi();
  app.get('/openapi.json', function openApiDescription(_req: Request, res: Response) {
    res
      .status(200)
      .set('content-type', 'application/json; charset=utf-8')
      .set('cache-control', 'no-cache')
      .send(openApi);
  });

  if (operator !== undefined) {
    const expected = digest(operator.token);
    const now = operator.now ?? Date.now;
    const { control } = operator;
    const problem = (req: Request, res: Response, error: ProxyError): void =>
      writeProblem(res, error, requestIdOf(req));
    /** A change Redis could not take to the other replicas yet (it applies here): not a success. */
    const notShared = (req: Request, res: Response): void => problem(req, res, new SharedStateUnavailableError());
    const noStore = (res: Response): Response => res.set('cache-control', 'no-store');

    app.use('/admin', function requireAdminToken(req: Request, res: Response, next: NextFunction) {
      if (!tokenMatches(req.headers.authorization, expected))
        return problem(
          req,
          res,
          new UnauthenticatedError(req.headers.authorization === undefined ? 'missing' : 'signature'),
        );
      next();
    });
    app.use('/admin', function requireJson(req: Request, res: Response, next: NextFunction) {
      // A body must say it is JSON; one sent as a form or as text would otherwise arrive empty and
      // be blamed on a missing member (RFC 9110 §15.5.16).
      const hasBody =
        req.headers['content-length'] !== undefined
          ? req.headers['content-length'] !== '0'
          : req.headers['transfer-encoding'] !== undefined;
      if (hasBody && !req.is(['application/json', 'application/*+json']))
        return problem(req, res, new UnsupportedMediaTypeError());
      next();
    });
    app.use('/admin', express.json({ limit: '16kb', strict: false, type: ['application/json', 'application/*+json'] }));

    app.get('/admin/config', function effectiveConfig(_req: Request, res: Response) {
      const config = operator.config();
      const overrides = control.overrides();
      const resources = Object.fromEntries(
        RESOURCE_NAMES.map((name) => [
          name,
          { ...operator.policies.policyFor(name), ...(overrides[name] !== undefined && { override: overrides[name] }) },
        ]),
      );
      noStore(res).json({
        cache: { ...config.cache, effective: resources },
        rateLimit: config.rateLimit,
        upstream: config.upstream,
        control: config.control,
        auth: config.auth,
      });
    });

    app.get('/admin/cache/ttl', function listTtl(_req: Request, res: Response) {
      noStore(res).json({ overrides: control.overrides() });
    });

    app.put('/admin/cache/ttl/:resource', async function setTtl(req: Request, res: Response) {
      const resource = String(req.params.resource);
      if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
      const parsed = ttlOverrideSchema.safeParse(req.body);
      if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
      if (!(await control.setOverride(resource, parsed.data))) return notShared(req, res);
      noStore(res).json({ resource, override: parsed.data, effective: operator.policies.policyFor(resource) });
    });

    app.delete('/admin/cache/ttl/:resource', async function deleteTtl(req: Request, res: Response) {
      const resource = String(req.params.resource);
      if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
      if (!(await control.deleteOverride(resource))) return notShared(req, res);
      res.status(204).end();
    });

    app.post('/admin/cache/purge', async function purge(req: Request, res: Response) {
      const parsed = purgeBody.safeParse(req.body);
      if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
      const { company_id: company, resource } = parsed.data;
      if (resource !== undefined && !isResourceName(resource))
        return problem(req, res, new NotFoundError('No such resource.'));
      // Without the store's new generation, or the announcement, the other replicas keep serving.
      if (!(await operator.reads.purge(company, resource))) return notShared(req, res);
      noStore(res).json({ company_id: company, resource: resource ?? null, purged: true });
    });

    app.get('/admin/revocations', function listRevocations(req: Request, res: Response) {
      const listed = page(control.revocations(), (r) => `${r.kind}/${r.id}`, req.query);
      if (!('items' in listed)) return problem(req, res, listed);
      noStore(res).json(listed);
    });

    app.post('/admin/revocations', async function revoke(req: Request, res: Response) {
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

    app.delete('/admin/revocations/:kind/:id', async function unrevoke(req: Request, res: Response) {
      const kind = String(req.params.kind);
      if (kind !== 'jti' && kind !== 'sub' && kind !== 'digest')
        return problem(req, res, new NotFoundError('Revocations are by jti, sub or digest.'));
      if (!(await control.unrevoke(kind satisfies RevocationKind, String(req.params.id)))) return notShared(req, res);
      res.status(204).end();
    });

    app.get('/admin/blocks', function listBlocks(req: Request, res: Response) {
      const listed = page(control.blocks(), (b) => `${b.kind}/${b.company_id}/${b.employee_id ?? ''}`, req.query);
      if (!('items' in listed)) return problem(req, res, listed);
      noStore(res).json(listed);
    });

    const block = (blocked: boolean) =>
      async function setCompanyBlock(req: Request, res: Response): Promise<void> {
        const company = companyOf(String(req.params.company));
        if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
        if (!(await control.blockCompany(company, blocked))) return notShared(req, res);
        noStore(res).status(blocked ? 200 : 204);
        if (blocked) res.json({ company_id: company, blocked });
        else res.end();
      };
    app.put('/admin/blocks/companies/:company', block(true));
    app.delete('/admin/blocks/companies/:company', block(false));

    const blockEmployee = (blocked: boolean) =>
      async function setEmployeeBlock(req: Request, res: Response): Promise<void> {
        const company = companyOf(String(req.params.company));
        const employee = companyOf(String(req.params.employee)); // the same grammar
        if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
        if (employee === undefined) return problem(req, res, new InvalidParameterError('employee', 'An employee id.'));
        if (!(await control.blockEmployee(company, employee, blocked))) return notShared(req, res);
        noStore(res).status(blocked ? 200 : 204);
        if (blocked) res.json({ company_id: company, employee_id: employee, blocked });
        else res.end();
      };
    app.put('/admin/blocks/employees/:company/:employee', blockEmployee(true));
    app.delete('/admin/blocks/employees/:company/:employee', blockEmployee(false));
  }

  app.use(function notFound(req: Request, res: Response) {
    writeProblem(res, new NotFoundError(), requestIdOf(req));
  });
  app.use(function onError(error: unknown, req: Request, res: Response, _next: NextFunction) {
    if (res.headersSent) return void res.destroy();
    const type = typeof error === 'object' && error !== null && 'type' in error ? error.type : undefined;
    const answer =
      type === 'entity.parse.failed'
        ? new InvalidBodyError('#', 'The body is not JSON.')
        : type === 'entity.too.large'
          ? new InvalidBodyError('#', 'The body is over 16 KiB.')
          : type === 'encoding.unsupported' || type === 'charset.unsupported'
            ? new UnsupportedMediaTypeError()
            : new InternalError();
    writeProblem(res, answer, requestIdOf(req));
  });
  return app;
}
