/**
 * Tracing as `npm start` runs it (docs/operations.md#tracing): `node dist/main.js` with only
 * OTEL_EXPORTER_OTLP_ENDPOINT set exports its spans over OTLP/HTTP to an in-process receiver, and
 * the spans of its last requests still reach the collector when it stops on SIGTERM (the batch is
 * flushed before the exit, not lost with the process).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { getWithToken } from '../helpers/http.js';
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { runNode } from '../helpers/process.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT = 'b7ad6b7169203331';

describe('node dist/main.js with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
  });
  afterAll(async () => {
    await receiver.close();
  });

  it('exports the spans of its requests, at the latest when it stops', async () => {
    const proxy = runNode('dist/main.js', {
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'slab-ops-proxy-e2e',
    });
    try {
      const [, bearer, base] = await proxy.waitFor(/Authorization: Bearer ([^']+)' '(http:\/\/[^/]+)\//);
      const res = await getWithToken(base ?? '', `${API_PREFIX}/receipts?per_page=2`, bearer ?? '', {
        headers: [['traceparent', `00-${TRACE}-${PARENT}-01`]],
      });
      expect(res.status).toBe(200);
      expect(await proxy.stop('SIGTERM')).toBe(0);
    } finally {
      await proxy.stop('SIGKILL');
    }
    // Received before the exit: the process waited for the collector's answer before exiting.
    const exports = receiver.received;
    expect(exports.length).toBeGreaterThan(0);
    const all = exports.map((e) => e.body.toString('utf8')).join('\n');
    expect(exports.every((e) => e.url === '/v1/traces' && e.contentType === 'application/json')).toBe(true);
    expect(all).toContain('"stringValue":"slab-ops-proxy-e2e"');
    expect(all).toContain(`"traceId":"${TRACE}"`);
    expect(all).toContain(`"parentSpanId":"${PARENT}"`);
    expect(all).toContain(`"name":"GET ${API_PREFIX}/receipts"`);
  });
});
