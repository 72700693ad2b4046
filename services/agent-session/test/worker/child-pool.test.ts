import { createLogger } from '@tollway/service-kit';
import type { AgentInput } from '../../src/agents/agent.types';
import { ChildPool } from '../../src/worker/child-pool';
import { ECHO_CHILD_INIT, TURN_CHILD_FILE } from './worker-harness';
const turn = (turnId: string) => ({ turnId, sessionId: '00000000-0000-4000-8000-000000000000', orgId: null });
const input = (content: unknown): AgentInput =>
  ({ history: [], message: { role: 'user', content }, userParams: null }) as unknown as AgentInput;

it('a turn its agent process cannot be sent fails at once, and the pool keeps its process count', async () => {
  // `send` serialises at once and throws for what it cannot (here a BigInt; in production a
  // history past V8's largest string): the reserved process used to stay out of the pool until
  // the turn timeout, and a pool of one then ran nothing.
  const pool = new ChildPool({
    size: 1,
    childFile: TURN_CHILD_FILE,
    logger: createLogger({ service: 'child-pool-test', silent: true }),
    init: ECHO_CHILD_INIT,
  });
  await pool.start();
  try {
    const never = new AbortController().signal;
    const first = await pool.reserve(never);
    const outcome = await first!.run(turn('unsendable'), input(10n), 600_000);
    expect(outcome).toMatchObject({
      kind: 'crashed',
      error: expect.stringContaining('could not reach the agent process'),
    });
    const second = await pool.reserve(never);
    expect(await second!.run(turn('next'), input('ping'), 600_000)).toMatchObject({ kind: 'success' });
  } finally {
    await pool.close();
  }
}, 30_000);
