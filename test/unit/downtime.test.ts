/** `slab_proxy_redis_down_seconds`' clock: from the connection's close (or the start) until it is ready again. */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { watchRedisDowntime } from '../../src/platform/redis/downtime.js';

/** An ioredis client as far as the clock sees it: a status and its 'ready' and 'close' events. */
class FakeConnection extends EventEmitter {
  status = 'connecting';

  becomeReady(): void {
    this.status = 'ready';
    this.emit('ready');
  }

  lose(): void {
    this.status = 'reconnecting';
    this.emit('close');
  }
}

describe('Redis downtime', () => {
  it('counts from the start until the first connection, then 0 while ready', () => {
    let now = 1_000_000;
    const connection = new FakeConnection();
    const downSeconds = watchRedisDowntime(connection, () => now);
    now += 2_500;
    expect(downSeconds()).toBe(2.5);
    connection.becomeReady();
    now += 60_000;
    expect(downSeconds()).toBe(0);
  });

  it('counts from the moment the connection closed, however often it is read, and resets on ready', () => {
    let now = 5_000_000;
    const connection = new FakeConnection();
    connection.becomeReady();
    const downSeconds = watchRedisDowntime(connection, () => now);
    expect(downSeconds()).toBe(0);
    connection.lose();
    now += 30_000;
    // Further closes while reconnecting do not restart the count.
    connection.emit('close');
    now += 15_000;
    expect(downSeconds()).toBe(45);
    expect(downSeconds()).toBe(45);
    connection.becomeReady();
    expect(downSeconds()).toBe(0);
    connection.lose();
    now += 1_000;
    expect(downSeconds()).toBe(1);
  });
});
