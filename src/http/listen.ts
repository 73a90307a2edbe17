/** Listening and closing, shared by the proxy's servers and the sandbox. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens and resolves the port actually bound (useful with port 0). */
export function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Stops accepting and resolves once every connection has ended. Idle keep-alive connections close
 * at once, and so does each connection whose request in flight has been answered (checked every
 * 50 ms): a kept-alive client must not hold the drain for its keep-alive timeout. Requests in
 * flight may finish for `drainMs`, after which every connection is ended.
 */
export function closeServer(server: Server, drainMs = 10_000): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), drainMs);
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    force.unref();
    idle.unref();
    server.close(() => {
      clearTimeout(force);
      clearInterval(idle);
      resolve();
    });
    server.closeIdleConnections();
  });
}
