/**
 * A TCP gate between a client and a server on loopback, to cut one client off while the others
 * still reach the server (a network partition): `cut()` drops every connection through it and
 * holds new ones open without forwarding a byte (the client's commands time out, as across a
 * partition); `restore()` forwards again.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpGate {
  readonly port: number;
  /** `redis://127.0.0.1:<port>`, for a Redis behind the gate. */
  readonly redisUrl: string;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpGate(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpGate> {
  let open = true;
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server: Server = createServer((client) => {
    track(client);
    if (!open) return; // held open, never answered
    const upstream = connect(targetPort, targetHost);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the gate has no port');
  const dropAll = (): void => {
    for (const socket of [...sockets]) socket.destroy();
  };
  return {
    port: address.port,
    redisUrl: `redis://127.0.0.1:${String(address.port)}`,
    cut() {
      open = false;
      dropAll();
    },
    restore() {
      open = true;
      dropAll(); // the held connections go, so that the client connects anew through the gate
    },
    close() {
      open = false;
      dropAll();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
