import type { Redis } from 'ioredis';

/** Deletes every key under `prefix` (SCAN + DEL); tests call it in afterAll. */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (found.length > 0) await redis.del(...found);
  } while (cursor !== '0');
}

/** Counts the writes to a connection's socket from now on (tests): each is one round trip, as a pipeline goes out in one. */
export function countSocketWrites(client: Redis): () => number {
  const stream = (client as unknown as { stream: { write: (...args: unknown[]) => boolean } }).stream;
  let writes = 0;
  const write = stream.write.bind(stream);
  stream.write = (...args: unknown[]) => {
    writes++;
    return write(...args);
  };
  return () => writes;
}
