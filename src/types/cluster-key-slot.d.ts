/** `cluster-key-slot` (the ioredis team's CRC16 of a key, hash tags honoured): ships no types. */
declare module 'cluster-key-slot' {
  /** The Redis Cluster slot (0–16383) that serves `key`. */
  export default function calculateSlot(key: string | Buffer): number;
}
