import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { AccessLog } from './access-log';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('AccessLog', () => {
  it('with no delay, writes the lines of one event-loop turn in one write, each a JSON record in the logger shape', async () => {
    const writes: string[] = [];
    const log = new AccessLog({ service: 'svc', write: (chunk) => writes.push(chunk), maxDelayMs: 0 });
    log.info('request', { request_id: 'a', status: 200, trace_id: undefined });
    log.info('request', { request_id: 'b', status: 404 });
    expect(writes).toHaveLength(0);
    await nextTurn();
    expect(writes).toHaveLength(1);
    const records = writes[0]!
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(records).toEqual([
      {
        level: 'info',
        message: 'request',
        service: 'svc',
        timestamp: expect.any(String),
        request_id: 'a',
        status: 200,
      },
      {
        level: 'info',
        message: 'request',
        service: 'svc',
        timestamp: expect.any(String),
        request_id: 'b',
        status: 404,
      },
    ]);
    expect(Number.isNaN(Date.parse(records[0]!.timestamp as string))).toBe(false);
    expect('trace_id' in records[0]!).toBe(false);

    log.info('request', { request_id: 'c' });
    await nextTurn();
    expect(writes).toHaveLength(2);
  });

  it('keeps a control character or a quote in a field inside its own line', async () => {
    const writes: string[] = [];
    const log = new AccessLog({ service: 'svc', write: (chunk) => writes.push(chunk), maxDelayMs: 0 });
    log.info('request', { path: '/v1/x\n{"forged":true}"' });
    await nextTurn();
    const lines = writes[0]!.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect((JSON.parse(lines[0]!) as { path: string }).path).toBe('/v1/x\n{"forged":true}"');
  });

  it('survives a sink that throws (stdout closed) and goes on writing later lines', async () => {
    let fail = true;
    const writes: string[] = [];
    const log = new AccessLog({
      service: 'svc',
      write: (chunk) => {
        if (fail) throw new Error('EPIPE');
        writes.push(chunk);
      },
    });
    log.info('request', { n: 1 });
    await nextTurn();
    fail = false;
    log.info('request', { n: 2 });
    log.flush();
    expect(writes).toHaveLength(1);
    expect(writes[0]).toContain('"n":2');
  });

  it('gathers the lines of many turns into one write, made once the first line has waited maxDelayMs', async () => {
    const writes: string[] = [];
    const log = new AccessLog({ service: 'svc', write: (chunk) => writes.push(chunk), maxDelayMs: 60 });
    log.info('request', { n: 1 });
    await nextTurn();
    log.info('request', { n: 2 });
    await sleep(20);
    log.info('request', { n: 3 });
    expect(writes).toHaveLength(0);
    await sleep(80);
    expect(writes).toHaveLength(1);
    expect(
      writes[0]!
        .trimEnd()
        .split('\n')
        .map((line) => (JSON.parse(line) as { n: number }).n),
    ).toEqual([1, 2, 3]);
    // A later line waits its own delay, not what is left of one already spent.
    log.info('request', { n: 4 });
    await sleep(20);
    expect(writes).toHaveLength(1);
    await sleep(80);
    expect(writes).toHaveLength(2);
  });

  it('writes at once when maxPendingChars are waiting, and the rest within the delay', async () => {
    const writes: string[] = [];
    const log = new AccessLog({
      service: 'svc',
      write: (chunk) => writes.push(chunk),
      maxDelayMs: 40,
      maxPendingChars: 1000,
    });
    for (let n = 0; n < 10; n++) log.info('request', { n, filler: 'x'.repeat(180) });
    expect(writes.length).toBeGreaterThanOrEqual(2);
    for (const chunk of writes) expect(chunk.length).toBeLessThan(1000 + 300);
    const early = writes.length;
    await sleep(80);
    const lines = writes.join('').trimEnd().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { n: number }).n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(writes.length).toBe(early + 1);
  });

  it('writes the lines still waiting when the process exits, and its timer does not keep it alive', async () => {
    // A child process logs two lines and then has nothing left to do, or calls process.exit at once.
    const script = (exit: boolean) => `
      const { AccessLog } = require(${JSON.stringify(join(__dirname, 'access-log.ts'))});
      const log = new AccessLog({ service: 'child', maxDelayMs: 60_000 });
      log.info('request', { n: 1 });
      log.info('request', { n: 2 });
      ${exit ? 'process.exit(0);' : ''}
    `;
    for (const exit of [false, true]) {
      const started = Date.now();
      const child = spawn(process.execPath, ['--require', 'tsx/cjs', '-e', script(exit)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (data: Buffer) => (out += data.toString()));
      child.stderr.on('data', (data: Buffer) => (err += data.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(err).toBe('');
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(
        out
          .trimEnd()
          .split('\n')
          .map((line) => (JSON.parse(line) as { n: number }).n),
      ).toEqual([1, 2]);
    }
  });
});
