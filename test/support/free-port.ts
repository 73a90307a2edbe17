/**
 * Free loopback ports, for processes that cannot listen on port 0 themselves (redis-server, a
 * replica told its PORT and ADMIN_PORT) in the tests, the benchmark and the load test. Ports are
 * free when probed; a caller that loses the race to another process should retry with new ones.
 *
 * Several ports a process needs at once are probed together: a probe closed before the next one
 * opens can be handed the very same port again, and a replica once got PORT = ADMIN_PORT that way.
 */
import { createServer, type Server } from 'node:net';

function probe(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** `count` distinct free ports: every probe is held open until all of them are known. */
export async function freePorts(count: number): Promise<number[]> {
  const probes = await Promise.all(Array.from({ length: count }, probe));
  const ports = probes.map((server) => {
    const address = server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  });
  await Promise.all(probes.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}

export async function freePort(): Promise<number> {
  const [port = 0] = await freePorts(1);
  return port;
}
