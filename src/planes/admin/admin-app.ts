/**
 * The admin plane on `ADMIN_PORT` (docs/operations.md#the-operator-api). Liveness, readiness, metrics and the
 * client surface's OpenAPI description always; with `ADMIN_TOKEN` set, the operator API behind a
 * bearer token compared in constant time: the effective settings, run-time TTL overrides, purges,
 * revocations, blocks and company weights, each shared with every replica, the lists of what is in
 * force, and this replica's figures per company and freshness advice per resource. The change
 * feed's tokens (`INVALIDATE_TOKEN`, `INVALIDATE_TOKEN_FILE`: docs/operations.md#the-change-feed)
 * reach the soft invalidations alone; with only them set, only that route is mounted.
 * Bodies must be JSON (415 otherwise) and are checked against a strict schema: a bad one is a
 * problem+json 400 `invalid_body` whose `pointer` names the member (RFC 9457 §3).
 *
 * Each group of routes is its own module, given only the parts it uses; this one mounts them, the
 * operator API behind its gate (operator-gate.ts), and answers what none of them took.
 */
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { FreshnessLedger } from '../../cache/freshness/freshness-ledger.js';
import type { CachePolicies } from '../../cache/read/policy.js';
import type { ReadService } from '../../cache/read/read-service.js';
import type { FileConfig } from '../../config/schema.js';
import type { OperatorControl } from '../../control/operator-control.js';
import { InternalError, NotFoundError } from '../../errors/proxy-error.js';
import { writeProblem } from '../../http/problem.js';
import { requestIdOf } from '../../http/request-id.js';
import type { Metrics } from '../../observability/metrics.js';
import type { UpstreamBudget } from '../../upstream-guard/upstream-budget.js';
import { blockRoutes } from './block-routes.js';
import { companyRoutes } from './company-routes.js';
import { documentRoutes } from './document-routes.js';
import { freshnessRoutes } from './freshness-routes.js';
import { healthRoutes, type Readiness } from './health-routes.js';
import { type InvalidationLimit, invalidationRoutes } from './invalidation-routes.js';
import { bodyParserProblem, type OperatorCredentials, operatorGate, operatorOnly } from './operator-gate.js';
import { purgeRoutes } from './purge-routes.js';
import { revocationRoutes } from './revocation-routes.js';
import { settingsRoutes } from './settings-routes.js';
import { weightRoutes } from './weight-routes.js';

export type { Phase, Readiness } from './health-routes.js';

export interface OperatorApi {
  /** The admin token, and the change feed's tokens (`POST /admin/cache/invalidate` only). */
  readonly credentials: OperatorCredentials;
  /** The change feed's bucket on `POST /admin/cache/invalidate`, and where refusals are counted. */
  readonly invalidationLimit: InvalidationLimit;
  readonly config: () => FileConfig;
  readonly policies: CachePolicies;
  readonly reads: ReadService;
  readonly control: OperatorControl;
  /** The upstream budget, for the company weights in force. */
  readonly budget: Pick<UpstreamBudget, 'weights'>;
  /** Per-company figures of this replica (`/admin/companies`). */
  readonly metrics: Pick<Metrics, 'companies'>;
  readonly cacheBytes: () => ReadonlyMap<string, number>;
  /** What this replica's fills learnt of each resource's pages (`/admin/cache/freshness`). */
  readonly freshness: Pick<FreshnessLedger, 'advice'>;
  readonly now?: () => number;
}

export interface AdminAppOptions {
  readonly readiness: Readiness;
  readonly metrics: Pick<Metrics, 'render'>;
  /**
   * The operator API (with an admin token or the change feed's); without it only `/healthz`,
   * `/readyz`, `/metrics` and `/openapi.json` exist.
   */
  readonly operator?: OperatorApi | undefined;
  /** The request log middleware (pino-http), first in line. */
  readonly log?: ((req: Request, res: Response, next: NextFunction) => void) | undefined;
}

export function createAdminApp(options: AdminAppOptions): Express {
  const { operator } = options;
  const app = express();
  app.disable('x-powered-by');
  if (options.log !== undefined) app.use(options.log);
  healthRoutes(app, options.readiness);
  documentRoutes(app, options.metrics);
  if (operator !== undefined) operatorRoutes(app, operator);
  app.use(notFound);
  app.use(onError);
  return app;
}

/**
 * The operator API: the change feed's route first, which either kind of token reaches; then the
 * admin token's gate (a feed token is a 403 on any other `/admin` path, mounted or not), then the
 * rest, mounted only with an admin token.
 */
function operatorRoutes(app: Express, operator: OperatorApi): void {
  app.use('/admin', ...operatorGate(operator.credentials));
  invalidationRoutes(app, operator.reads, operator.invalidationLimit);
  app.use('/admin', operatorOnly(operator.credentials));
  if (operator.credentials.adminToken === undefined) return;
  settingsRoutes(app, operator);
  purgeRoutes(app, operator.reads);
  revocationRoutes(app, operator.control, operator.now ?? Date.now);
  blockRoutes(app, operator.control);
  companyRoutes(app, operator);
  freshnessRoutes(app, operator);
  weightRoutes(app, operator);
}

function notFound(req: Request, res: Response): void {
  writeProblem(res, new NotFoundError(), requestIdOf(req));
}

function onError(error: unknown, req: Request, res: Response, _next: NextFunction): void {
  if (res.headersSent) return void res.destroy();
  writeProblem(res, bodyParserProblem(error) ?? new InternalError(), requestIdOf(req));
}
