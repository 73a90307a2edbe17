/**
 * Free loopback ports, for processes that cannot listen on port 0 themselves (redis-server, a
 * replica told its PORT and ADMIN_PORT) in the tests, the benchmark and the load test. Ports are
 * free when probed; a caller that loses the race to another process should retry with new ones.
 *
 * They are drawn below the kernel's ephemeral range (`ip_local_port_range`), never from it: a port
 * handed out there can be taken meanwhile as the local end of any outgoing connection — a replica
 * reconnecting to a Redis that is down, or to nodes not started yet, makes such connections many
 * times a second — and the process it was meant for then cannot listen on it (a Redis Cluster node
 * failed to start that way, on a port that a replica's connection attempts had taken).
 *
 * Several ports a process needs at once are probed together: a probe closed before the next one
 * opens can be handed the very same port again, and a replica once got PORT = ADMIN_PORT that way.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

/** The lowest port drawn from: above the well-known and most registered services' ports. */
const LOWEST = 10_240;

/** The first port of the ephemeral range (Linux's setting; the IANA range's start elsewhere). */
function ephemeralStart(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return low !== undefined && Number.isInteger(low) && low > LOWEST + 1_000 ? low : 32_768;
  } catch {
    return 49_152;
  }
}

const HIGHEST = ephemeralStart() - 1;

function probe(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/** `count` distinct free ports: every probe is held open until all of them are known. */
export async function freePorts(count: number): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  while (ports.length < count) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));
    if (ports.includes(port)) continue;
    const server = await probe(port);
    if (server === undefined) continue;
    held.push(server);
    ports.push(port);
  }
  await Promise.all(held.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  return ports;
}

export async function freePort(): Promise<number> {
  const [port = 0] = await freePorts(1);
  return port;
}
