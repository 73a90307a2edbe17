/**
 * `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. An upstream that sends
 * garbage, nothing, or an absurd wait still gets a bounded pause: long enough to stop hammering
 * it, short enough that a typo cannot take a company offline for a day.
 */
/**
 * A wait in whole seconds for a client (`Retry-After`, the RateLimit field's `t`): rounded up, so a
 * client that waits what it is told is never early, and at least 1 (a 0 would invite a retry now).
 */
export function secondsToWait(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export const DEFAULT_PAUSE_MS = 5_000;
export const MAX_PAUSE_MS = 600_000;
const DELAY_SECONDS = /^[0-9]{1,10}$/;
/**
 * The three HTTP-date forms a recipient must accept (RFC 9110 §5.6.7): IMF-fixdate, RFC 850 and
 * asctime. Checked before Date.parse, which reads "-5" or "1.5" as dates.
 */
const HTTP_DATE = [
  /^[A-Z][a-z]{2}, [0-9]{2} [A-Z][a-z]{2} [0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/,
  /^[A-Z][a-z]+, [0-9]{2}-[A-Z][a-z]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT$/,
  /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}$/,
];

export function pauseFromRetryAfter(value: string | undefined, now: number): number {
  const text = value?.trim() ?? '';
  let ms: number;
  if (DELAY_SECONDS.test(text)) ms = Number(text) * 1000;
  else {
    const at = HTTP_DATE.some((form) => form.test(text))
      ? Date.parse(text.endsWith('GMT') ? text : `${text} GMT`)
      : Number.NaN;
    ms = Number.isNaN(at) ? DEFAULT_PAUSE_MS : at - now;
  }
  // A date in the past or "0" still pauses a moment: the upstream did just say 429.
  return Math.min(MAX_PAUSE_MS, Math.max(1_000, ms));
}
