/**
 * Ports a process needs together are distinct (a replica once got PORT = ADMIN_PORT), and below
 * the ephemeral range, where no outgoing connection can take one meanwhile.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePorts } from '../support/free-port.js';

const EPHEMERAL_START = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

describe('freePorts', () => {
  it('gives distinct ports, each one free to listen on', async () => {
    for (let round = 0; round < 20; round++) {
      const ports = await freePorts(6);
      expect(new Set(ports).size).toBe(6);
      for (const port of ports) expect(port).toBeLessThan(EPHEMERAL_START);
      const servers = await Promise.all(
        ports.map(
          (port) =>
            new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
              const server = createServer();
              server.once('error', reject);
              server.listen(port, '127.0.0.1', () => resolve(server));
            }),
        ),
      );
      await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });
});
