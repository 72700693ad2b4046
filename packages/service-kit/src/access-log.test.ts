import { AccessLog } from './access-log';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('AccessLog', () => {
  it('writes the lines of one event-loop turn in one write, each a JSON record in the logger shape', async () => {
    const writes: string[] = [];
    const log = new AccessLog({ service: 'svc', write: (chunk) => writes.push(chunk) });
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
    const log = new AccessLog({ service: 'svc', write: (chunk) => writes.push(chunk) });
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
});
