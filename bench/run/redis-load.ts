/** The Redis load phase (bench/phases/redis-load.ts) on a proxy of its own, stopped after. */
import { stop } from '../lib/processes.js';
import type { BenchContext, Page } from '../phases/context.js';
import { type RedisLoadFigures, runRedisLoad } from '../phases/redis-load.js';
import { type Rig, startRedisLoadProxy } from './rig.js';

export async function runRedisLoadPhase(
  ctx: BenchContext,
  rig: Rig,
  pages: readonly Page[],
): Promise<RedisLoadFigures> {
  const { proxy, keyPrefix } = await startRedisLoadProxy(rig, pages);
  try {
    return await runRedisLoad(ctx, {
      redisUrl: rig.redis.url,
      proxyUrl: proxy.url,
      adminUrl: proxy.adminUrl,
      keyPrefix,
      pages,
      bearer: rig.bearer,
    });
  } finally {
    await stop(proxy.launched);
  }
}
