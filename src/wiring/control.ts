/** The operator state (docs/operations.md#the-operator-api), shared through Redis when there is one. */
import { createOperatorControl, type OperatorControl } from '../control/operator-control.js';
import { errorFields } from '../observability/logger.js';
import type { Foundation } from './foundation.js';
import type { SharedParts } from './shared.js';

export function wireControl(
  { config, logger, now, metrics, closers }: Foundation,
  { redis }: SharedParts,
): OperatorControl {
  const control = createOperatorControl({
    syncIntervalMs: config.control.syncInterval * 1000,
    now,
    ...(redis !== undefined && { redis: { ...redis.control, prefix: config.cache.keyPrefix } }),
    onError: (error) => {
      metrics.redisError('control');
      logger.warn(errorFields(error), 'operator state not confirmed with Redis');
    },
  });
  closers.add('operator state', () => control.close());
  return control;
}
