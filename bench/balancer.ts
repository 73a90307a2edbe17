/**
 * A round-robin TCP load balancer for `npm run loadtest`, which runs the docker-compose topology
 * as local processes (nginx is the balancer in `docker-compose.yml`; it may not be installed
 * here). Each client connection goes to the next replica and stays there, as with nginx's
 * `upstream` and keep-alive clients; a replica that refuses the connection is skipped.
 *
 * As a process: `node dist-bench/bench/balancer.js`, with LB_PORT, LB_HOST (127.0.0.1) and
 * LB_BACKENDS (`host:port,…`); it prints `balancer listening on <port>`.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

export interface Backend {
  readonly host: string;
  readonly port: number;
}

export function parseBackends(text: string): Backend[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map((item) => {
      const colon = item.lastIndexOf(':');
      const port = Number(item.slice(colon + 1));
      if (colon <= 0 || !Number.isInteger(port) || port < 1 || port > 65_535)
        throw new TypeError(`LB_BACKENDS: not host:port: ${item}`);
      return { host: item.slice(0, colon), port };
    });
}

export function createBalancer(backends: readonly Backend[]): Server {
  if (backends.length === 0) throw new TypeError('LB_BACKENDS: at least one backend');
  let next = 0;
  function forward(client: Socket, attempt: number): void {
    const backend = backends[next % backends.length] ?? backends[0];
    next += 1;
    if (backend === undefined) return void client.destroy();
    const upstream = connect(backend.port, backend.host);
    upstream.setNoDelay(true);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.once('error', () => {
      // Refused before anything was sent: the next replica gets the connection.
      if (!connected && attempt + 1 < backends.length) return forward(client, attempt + 1);
      client.destroy();
    });
    client.once('error', () => upstream.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => {
      if (connected) client.destroy();
    });
  }
  return createServer({ pauseOnConnect: true, noDelay: true }, (client) => forward(client, 0));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const backends = parseBackends(process.env.LB_BACKENDS ?? '');
  const server = createBalancer(backends);
  server.listen(Number(process.env.LB_PORT ?? '8080'), process.env.LB_HOST ?? '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(
      `balancer listening on ${typeof address === 'object' && address !== null ? String(address.port) : '?'}\n`,
    );
  });
  const stop = (): void => {
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 500).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
