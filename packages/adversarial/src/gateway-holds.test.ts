import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkNothingHeld } from './gateway-holds';

describe('checkNothingHeld', () => {
  // A stand-in for the gateway's `/metrics`, serving `metrics`.
  let metrics = '';
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end(metrics));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => server.close());

  const gauges = (inFlight: number, leases: number, streams: number) =>
    [
      '# HELP tollway_engine_replica_in_flight Requests sent to an engine replica and not yet finished',
      `tollway_engine_replica_in_flight{model="hostile/cut",replica="http://127.0.0.1:1",service="g"} ${inFlight}`,
      'tollway_engine_replica_in_flight{model="tollway/sim-chat",replica="http://127.0.0.1:2",service="g"} 2',
      `tollway_capacity_leases_held{model="hostile/cut",service="g"} ${leases}`,
      `tollway_sse_streams_open{service="g"} ${streams}`,
      '',
    ].join('\n');
  const hostile = (id: string) => id.startsWith('hostile/');

  it('passes when the chosen models hold nothing, whatever the others hold', async () => {
    metrics = gauges(0, 0, 3);
    expect(await checkNothingHeld(port, hostile, { streams: false, settleMs: 0 })).toEqual([]);
  });

  it('names what is still held once the settle time is over', async () => {
    metrics = gauges(1, 2, 3);
    const details = (await checkNothingHeld(port, hostile, { streams: true, settleMs: 0 })).map((p) => p.detail);
    expect(details).toEqual([
      'held 0 ms after the last request ended: 1 requests in flight to a replica of hostile/cut, 2 capacity leases of hostile/cut, 3 event streams open',
    ]);
    const all = await checkNothingHeld(port, () => true, { streams: false, settleMs: 0 });
    expect(all[0]?.detail).toContain('2 requests in flight to a replica of tollway/sim-chat');
  });

  it('waits for what is held to be let go, up to the settle time', async () => {
    metrics = gauges(1, 0, 0);
    setTimeout(() => (metrics = gauges(0, 0, 0)), 300);
    expect(await checkNothingHeld(port, hostile, { streams: true, settleMs: 5000 })).toEqual([]);
  });
});
