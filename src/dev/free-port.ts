/**
 * A free loopback port, for processes that cannot listen on port 0 themselves (redis-server) in
 * the tests, the benchmark and the load test. The port is free when probed; a caller that loses
 * the race to another process should retry with a new one.
 */
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}
