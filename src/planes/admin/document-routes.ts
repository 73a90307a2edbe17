/**
 * What the replica publishes for tools, without a token: its Prometheus metrics
 * (docs/operations.md#metrics) and the client surface's OpenAPI description (docs/clients.md).
 */
import type { IRouter, Request, Response } from 'express';
import { METRICS_CONTENT_TYPE, type Metrics } from '../../observability/metrics.js';
import { renderOpenApi } from '../../reference/openapi.js';

export function documentRoutes(router: IRouter, metrics: Pick<Metrics, 'render'>): void {
  router.get('/metrics', async function prometheusMetrics(_req: Request, res: Response) {
    const text = await metrics.render();
    res.status(200).set('content-type', METRICS_CONTENT_TYPE).set('cache-control', 'no-store').send(text);
  });

  // The client surface's OpenAPI description (docs/clients.md), public like /metrics.
  const openApi = renderOpenApi();
  router.get('/openapi.json', function openApiDescription(_req: Request, res: Response) {
    res
      .status(200)
      .set('content-type', 'application/json; charset=utf-8')
      .set('cache-control', 'no-cache')
      .send(openApi);
  });
}
