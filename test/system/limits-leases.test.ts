/**
 * Leased points (src/limits/leased-window.ts) on a real Redis: two replicas' limiters share one count.
 * The total admitted never passes `points`; at most a batch per replica is lost to the other;
 * and most decisions need no Redis call at all.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { createInboundLimiter, type InboundLimiter } from '../../src/limits/inbound.js';
import { createRedisClient } from '../../src/platform/redis/connection.js';
import { RedisHealth } from '../../src/platform/redis/health.js';
import { testPrincipal } from '../helpers/principals.js';
import { clientReady, commandCalls, type RedisServer, startRedis } from '../helpers/redis.js';

const POINTS = 200;
const REPLICAS = 2;
/** The batch the limiter reserves: points / (replicas × 16); a replica may hold two unspent. */
const BATCH = Math.floor(POINTS / (REPLICAS * 16));

function principal(subject: string): Principal {
  return testPrincipal({ subject, permissions: new Set(), expiresAt: 0 });
}

let redis: RedisServer;
const clients: Redis[] = [];

async function limiter(points = POINTS): Promise<InboundLimiter> {
  const client = createRedisClient({ url: redis.url, commandTimeoutMs: 100 });
  await clientReady(client);
  clients.push(client as Redis);
  return createInboundLimiter({
    perCredential: { points, duration: 60 },
    perCompany: { points: 1_000_000, duration: 60 },
    replicas: REPLICAS,
    redis: { client, health: new RedisHealth(client), prefix: 'lease-test', timeoutMs: 100 },
  });
}

async function allowed(on: InboundLimiter, who: Principal): Promise<boolean> {
  return (await on.decide(who)).allowed;
}

async function evalCalls(): Promise<number> {
  const admin = new Redis(redis.url);
  const calls = (await commandCalls(admin, 'evalsha')) + (await commandCalls(admin, 'eval'));
  admin.disconnect();
  return calls;
}

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

describe('leased points', () => {
  it('one replica alone gets exactly the allowance, in about points / batch Redis calls', async () => {
    const one = await limiter();
    const before = await evalCalls();
    const who = principal('solo');
    let admitted = 0;
    for (let i = 0; i < POINTS + 50; i++) if (await allowed(one, who)) admitted += 1;
    expect(admitted).toBe(POINTS);
    const calls = (await evalCalls()) - before;
    // Credential and company reservations; far fewer than one call per decision.
    expect(calls).toBeLessThan((POINTS + 50) / 3);
  });

  it('a busy key’s batches grow with its demand: 20 000 decisions take a few dozen Redis calls, not 400', async () => {
    // 1 000 000 points a minute over 2 replicas: batches may grow to 31 250 points. At a fixed
    // 100 a batch, 20 000 decisions would take 200 reservations of each policy.
    const busy = await limiter(1_000_000);
    const who = principal('busy');
    const before = await evalCalls();
    let admitted = 0;
    for (let i = 0; i < 20_000; i++) if (await allowed(busy, who)) admitted += 1;
    expect(admitted).toBe(20_000);
    expect((await evalCalls()) - before).toBeLessThan(40);
  });

  it('two replicas together never pass the allowance, and lose at most two batches each', async () => {
    const [one, two] = [await limiter(), await limiter()];
    const who = principal('pair');
    let admitted = 0;
    for (let i = 0; i < POINTS + 100; i++) if (await allowed(i % 2 === 0 ? one : two, who)) admitted += 1;
    expect(admitted).toBeLessThanOrEqual(POINTS);
    expect(admitted).toBeGreaterThanOrEqual(POINTS - REPLICAS * 2 * BATCH);
  });

  it('concurrent decisions on one replica share reservations sized to their demand, and get exactly the allowance', async () => {
    const one = await limiter();
    const who = principal('burst');
    const verdicts = await Promise.all(Array.from({ length: POINTS + 40 }, () => one.decide(who)));
    expect(verdicts.filter((v) => v.allowed).length).toBe(POINTS);
  });
});
