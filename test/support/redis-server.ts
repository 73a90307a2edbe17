/**
 * A `redis-server` process started with the given arguments, resolved once it accepts
 * connections: what the tests' single servers and the Redis Cluster's nodes are launched with.
 */
import { type ChildProcess, spawn } from 'node:child_process';

export function spawnRedisServer(args: readonly string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      if (output.includes('Ready to accept connections')) {
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve(child);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.resume();
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${String(code)}: ${output.slice(-500)}`)));
  });
}
