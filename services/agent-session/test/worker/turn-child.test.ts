import { once } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import type { ChildInit, ChildMessage, ChildRun } from '../../src/worker/child-protocol';
import { forkNodeFile } from '../../src/worker/spawn-node';
import {
  builtInAgent,
  completion,
  ECHO_CHILD_INIT,
  sendJson,
  startTestServer,
  TURN_CHILD_FILE,
} from './worker-harness';

const init: ChildInit = { type: 'init', ...ECHO_CHILD_INIT };

/** Each child's messages in order: two that arrive in one turn of the event loop are both kept. */
const inboxes = new WeakMap<ChildProcess, { queued: ChildMessage[]; waiting: ((message: ChildMessage) => void)[] }>();

function nextMessage(child: ChildProcess): Promise<ChildMessage> {
  let inbox = inboxes.get(child);
  if (!inbox) {
    const created = { queued: [] as ChildMessage[], waiting: [] as ((message: ChildMessage) => void)[] };
    child.on('message', (message: ChildMessage) => {
      const waiter = created.waiting.shift();
      if (waiter) waiter(message);
      else created.queued.push(message);
    });
    inboxes.set(child, (inbox = created));
  }
  const queued = inbox.queued.shift();
  if (queued) return Promise.resolve(queued);
  const { waiting } = inbox;
  return new Promise((resolve) => waiting.push(resolve));
}

async function startChild(options: Partial<ChildInit> = {}): Promise<{ child: ChildProcess; stderr: () => string }> {
  const child = forkNodeFile(TURN_CHILD_FILE, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr?.on('data', (data: Buffer) => (stderr += data.toString()));
  child.send({ ...init, ...options });
  expect(await nextMessage(child)).toEqual({ type: 'ready' });
  return { child, stderr: () => stderr };
}

it("runs a turn sent by its parent: the agent's events, then its messages", async () => {
  const { child } = await startChild();
  const run: ChildRun = {
    type: 'run',
    turnId: 'turn-1',
    sessionId: '00000000-0000-4000-8000-000000000000',
    orgId: null,
    input: { history: [], message: { role: 'user', content: 'ping' }, userParams: null },
  };
  child.send(run);
  // The events an agent emits all reach the parent before the turn's result.
  expect(await nextMessage(child)).toEqual({
    type: 'events',
    turnId: 'turn-1',
    events: [{ type: 'message.delta', message_index: 0, content: 'ping' }],
  });
  const done = await nextMessage(child);
  expect(done).toMatchObject({ type: 'done', turnId: 'turn-1', ok: true });
  child.kill('SIGKILL');
  await once(child, 'exit');
});

it('exits at once and quietly when its parent goes away', async () => {
  const { child, stderr } = await startChild();
  const exited = once(child, 'exit');
  child.disconnect();
  const [code] = await exited;
  expect(code).toBe(1);
  expect(stderr()).not.toMatch(/EPIPE|Uncaught|Error/);
});

it("names each turn's organization on its model calls, and none for a session without one", async () => {
  // One child runs the turns of many organizations, one after another: the header is the turn's.
  const gateway = await startTestServer((_request, res) => sendJson(res, 200, completion('pong')));
  const { child } = await startChild({ agentModule: builtInAgent('chat'), gatewayBaseUrl: `${gateway.url}/v1` });
  try {
    for (const [turnId, orgId] of [
      ['turn-a', 'org_a'],
      ['turn-none', null],
      ['turn-b', 'org_b'],
    ] as const) {
      const run: ChildRun = {
        type: 'run',
        turnId,
        sessionId: '00000000-0000-4000-8000-000000000000',
        orgId,
        input: { history: [], message: { role: 'user', content: 'ping' }, userParams: null },
      };
      child.send(run);
      let message = await nextMessage(child);
      // A model call is reported to the parent (chat-start, chat-end) before the turn's end.
      // So are its streamed deltas (the events).
      while (message.type !== 'done') message = await nextMessage(child);
      expect(message).toMatchObject({ type: 'done', turnId, ok: true });
    }
    expect(gateway.received.map((r) => r.headers['x-tollway-organization'])).toEqual(['org_a', undefined, 'org_b']);
    expect(gateway.received.every((r) => r.headers.authorization === 'Bearer unused')).toBe(true);
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit');
    await gateway.close();
  }
});
