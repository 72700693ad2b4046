import type { ChainableCommander } from 'ioredis';

/** Runs a pipeline or transaction and returns its replies; throws the first command's error. */
export async function execOrThrow(batch: ChainableCommander): Promise<unknown[]> {
  const replies = (await batch.exec()) ?? [];
  return replies.map(([err, reply]) => {
    if (err) throw err;
    return reply;
  });
}
