/**
 * The V8 flags the proxy runs with wherever it runs: `npm start`, the image's `CMD` (and so
 * docker-compose and Kubernetes, which run the image's command), and the benchmark's replicas,
 * which measure the proxy as shipped. A test holds all three to this list.
 *
 * `--max-semi-space-size=32` (MiB; V8's default is 16). A cache hit allocates a few kilobytes of
 * short-lived objects; with the default young generation, the ones in flight at each scavenge
 * (every ~30 ms at 20 000 hits a second) were promoted often enough that V8 ran a full
 * mark-compact every 3–10 s, each holding the event loop for 10–25 ms: the proxy's whole p99 at
 * half load (issue 11). A young generation twice as large is scavenged half as often, so far less
 * survives into the old one. Measured with `npm run bench` in one session: p99 at full load over
 * 50 pages 5.24 → 3.69 ms, at half load 8.36 → 4.91 ms; CPU per hit unchanged; resident memory
 * about 30 MB more.
 */
export const RUNTIME_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
