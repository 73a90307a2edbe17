/**
 * The control plane on `ADMIN_PORT` (DESIGN §8). Liveness, readiness, metrics and the client surface's
 * OpenAPI description always; with `ADMIN_TOKEN`
 * set, the operator API behind a bearer token compared in constant time: the effective settings,
 * run-time TTL overrides (every replica), and purges (every replica). Bodies are validated and a
 * bad one is a problem+json 400 naming the field.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { RESOURCE_NAMES, isResourceName } from '../catalog/resources.js';
import type { CachePolicies } from '../cache/policy.js';
import type { ReadService } from '../cache/read-service.js';
import type { FileConfig } from '../config/schema.js';
import { InternalError, InvalidParameterError, NotFoundError, SharedStateUnavailableError, UnauthenticatedError } from '../errors/proxy-error.js';
import { writeProblem } from '../http/problem.js';
import { requestIdOf } from '../http/request-id.js';
import { METRICS_CONTENT_TYPE, type Metrics } from '../observability/metrics.js';
import { renderOpenApi } from '../catalog/openapi.js';
import { type SharedControl, ttlOverrideSchema } from './shared-control.js';

export type Phase = 'starting' | 'ready' | 'draining';

export interface Readiness {
  /** Ready only between the end of the start and the beginning of a drain. */
  phase(): Phase;
  /** Component states for the body, e.g. `{ upstream: 'ok' }`. */
  components(): Record<string, string>;
}

export interface OperatorApi {
  readonly token: string;
  readonly config: () => FileConfig;
  readonly policies: CachePolicies;
  readonly reads: ReadService;
  readonly control: SharedControl;
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

/** DESIGN §5's company grammar: a positive integer, or 1–64 of `[A-Za-z0-9_-]`. */
const COMPANY = /^[A-Za-z0-9_-]{1,64}$/;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Constant time in the token's content: both sides are hashed to one length first. */
function tokenMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected);
}

function companyOf(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? String(value) : undefined;
  return typeof value === 'string' && COMPANY.test(value) ? value : undefined;
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

  // The client surface's OpenAPI description (README, What clients see), public like /metrics.
  const openApi = renderOpenApi();
  app.get('/openapi.json', function openApiDescription(_req: Request, res: Response) {
    res.status(200).set('content-type', 'application/json; charset=utf-8').set('cache-control', 'no-cache').send(openApi);
  });

  if (operator !== undefined) {
    const expected = digest(operator.token);
    const problem = (req: Request, res: Response, error: Parameters<typeof writeProblem>[1]): void => writeProblem(res, error, requestIdOf(req));
    /** A change Redis could not take to the other replicas (it applies here): not a success. */
    const notShared = (req: Request, res: Response): void => problem(req, res, new SharedStateUnavailableError());

    app.use('/admin', function requireAdminToken(req: Request, res: Response, next: NextFunction) {
      if (!tokenMatches(req.headers.authorization, expected)) return problem(req, res, new UnauthenticatedError(req.headers.authorization === undefined ? 'missing' : 'signature'));
      next();
    });
    app.use('/admin', express.json({ limit: '16kb' }));

    app.get('/admin/config', function effectiveConfig(_req: Request, res: Response) {
      const config = operator.config();
      const overrides = operator.control.overrides();
      const resources = Object.fromEntries(
        RESOURCE_NAMES.map((name) => [name, { ...operator.policies.policyFor(name), ...(overrides[name] !== undefined && { override: overrides[name] }) }]),
      );
      res.set('cache-control', 'no-store').json({ cache: { ...config.cache, effective: resources }, rateLimit: config.rateLimit, upstream: config.upstream, auth: config.auth });
    });

    app.put('/admin/cache/ttl/:resource', async function setTtl(req: Request, res: Response) {
      const resource = String(req.params.resource);
      if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
      const parsed = ttlOverrideSchema.safeParse(req.body);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field = issue?.code === 'unrecognized_keys' ? (issue.keys[0] ?? 'body') : (issue?.path.map(String).join('.') ?? 'body');
        return problem(req, res, new InvalidParameterError(field === '' ? 'body' : field, 'Give whole seconds for ttl, staleWhileRevalidate, staleIfError or notFoundTtl.'));
      }
      if (!(await operator.control.setOverride(resource, parsed.data))) return notShared(req, res);
      res.set('cache-control', 'no-store').json({ resource, override: parsed.data, effective: operator.policies.policyFor(resource) });
    });

    app.delete('/admin/cache/ttl/:resource', async function deleteTtl(req: Request, res: Response) {
      const resource = String(req.params.resource);
      if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
      if (!(await operator.control.deleteOverride(resource))) return notShared(req, res);
      res.status(204).end();
    });

    app.post('/admin/cache/purge', async function purge(req: Request, res: Response) {
      const body: unknown = req.body;
      const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
      for (const key of Object.keys(fields)) if (key !== 'company_id' && key !== 'resource') return problem(req, res, new InvalidParameterError(key, 'Unknown field.'));
      const company = companyOf(fields.company_id);
      if (company === undefined) return problem(req, res, new InvalidParameterError('company_id', 'A positive integer or 1-64 characters of A-Z a-z 0-9 _ -.'));
      const resource = fields.resource;
      if (resource !== undefined && (typeof resource !== 'string' || !isResourceName(resource))) return problem(req, res, new NotFoundError('No such resource.'));
      // Without the store's new generation the other replicas keep serving: not a success.
      const stored = await operator.reads.purge(company, resource);
      const announced = await operator.control.announcePurge(company, resource);
      if (!stored || !announced) return notShared(req, res);
      res.set('cache-control', 'no-store').json({ company_id: company, resource: resource ?? null, purged: true });
    });

    app.post('/admin/revocations', async function revoke(req: Request, res: Response) {
      const body: unknown = req.body;
      const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
      for (const key of Object.keys(fields)) if (key !== 'jti' && key !== 'sub' && key !== 'exp') return problem(req, res, new InvalidParameterError(key, 'Unknown field.'));
      const { jti, sub, exp } = fields;
      if ((jti === undefined) === (sub === undefined)) return problem(req, res, new InvalidParameterError('jti', 'Give exactly one of jti or sub.'));
      if (exp !== undefined && (typeof exp !== 'number' || !Number.isInteger(exp) || exp <= 0)) return problem(req, res, new InvalidParameterError('exp', 'Seconds since the epoch.'));
      if (jti !== undefined) {
        if (typeof jti !== 'string' || jti === '' || jti.length > 256) return problem(req, res, new InvalidParameterError('jti', 'A token id (1-256 characters).'));
        // Kept until the token's exp; without one, for the longest a token may reasonably live.
        const until = exp ?? Math.floor(Date.now() / 1000) + DEFAULT_REVOCATION_SECONDS;
        if (!(await operator.control.revokeTokenId(jti, until))) return notShared(req, res);
        return void res.status(201).set('cache-control', 'no-store').json({ jti, until });
      }
      if (typeof sub !== 'string' || sub === '' || sub.length > 256) return problem(req, res, new InvalidParameterError('sub', 'A subject (1-256 characters).'));
      if (!(await operator.control.revokeSubject(sub))) return notShared(req, res);
      res.status(201).set('cache-control', 'no-store').json({ sub });
    });

    const block = (blocked: boolean) =>
      async function setCompanyBlock(req: Request, res: Response): Promise<void> {
        const company = companyOf(String(req.params.company));
        if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
        if (!(await operator.control.blockCompany(company, blocked))) return notShared(req, res);
        res.status(blocked ? 200 : 204).set('cache-control', 'no-store');
        if (blocked) res.json({ company_id: company, blocked });
        else res.end();
      };
    app.put('/admin/blocks/companies/:company', block(true));
    app.delete('/admin/blocks/companies/:company', block(false));

    const blockEmployee = (blocked: boolean) =>
      async function setEmployeeBlock(req: Request, res: Response): Promise<void> {
        const company = companyOf(String(req.params.company));
        const employee = companyOf(String(req.params.employee)); // the same grammar (DESIGN §5)
        if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
        if (employee === undefined) return problem(req, res, new InvalidParameterError('employee', 'An employee id.'));
        if (!(await operator.control.blockEmployee(company, employee, blocked))) return notShared(req, res);
        res.status(blocked ? 200 : 204).set('cache-control', 'no-store');
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
    const malformed = typeof error === 'object' && error !== null && 'type' in error && error.type === 'entity.parse.failed';
    writeProblem(res, malformed ? new InvalidParameterError('body', 'The body is not JSON.') : new InternalError(), requestIdOf(req));
  });
  return app;
}
