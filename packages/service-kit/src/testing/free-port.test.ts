import net from 'node:net';
import { ephemeralPortRange, freePort, freePortBetween } from './free-port';
import { testPortRange } from './test-port-config';

describe('freePort', () => {
  it('reads the kernel ephemeral range', () => {
    const [low, high] = ephemeralPortRange();
    expect(low).toBeGreaterThan(0);
    expect(high).toBeGreaterThanOrEqual(low);
  });

  it('picks a port below the ephemeral range, where no listen(0) or outgoing connection is handed it', async () => {
    const [low] = ephemeralPortRange();
    for (let i = 0; i < 10; i++) {
      const port = await freePort();
      expect(port).toBeGreaterThanOrEqual(10000);
      expect(port).toBeLessThan(low);
      const server = net.createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', resolve);
      });
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('never picks a port some server holds, and says so when all are held', async () => {
    const [low] = ephemeralPortRange();
    const from = await freePort();
    const to = Math.min(from + 8, low);
    const held: net.Server[] = [];
    try {
      // Hold every port of a short stretch but one; the pick must be that one.
      for (let port = from + 1; port < to; port++) {
        const server = net.createServer();
        const ok = await new Promise<boolean>((resolve) => {
          server.once('error', () => resolve(false));
          server.listen(port, '127.0.0.1', () => resolve(true));
        });
        if (ok) held.push(server);
      }
      const heldPorts = new Set(held.map((server) => (server.address() as net.AddressInfo).port));
      const free = [...Array(to - from).keys()].map((k) => from + k).filter((port) => !heldPorts.has(port));
      for (let i = 0; i < 5; i++) expect(free).toContain(await freePortBetween(from, to, 200));
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(from, '127.0.0.1', resolve));
      held.push(blocker);
      if (free.length === 1) await expect(freePortBetween(from, to, 50)).rejects.toThrow(/no free port/);
    } finally {
      await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
    }
  });

  it('keeps to TOLLWAY_TEST_PORTS when it is set, and refuses a range it cannot read', () => {
    expect(testPortRange({})).toBeNull();
    expect(testPortRange({ TOLLWAY_TEST_PORTS: '22000-22999' })).toEqual([22000, 22999]);
    for (const bad of ['22000', '22999-22000', '80-90', '22000-70000', ' 22000-22999', '22000:22999']) {
      expect(() => testPortRange({ TOLLWAY_TEST_PORTS: bad })).toThrow(/TOLLWAY_TEST_PORTS/);
    }
  });

  it('picks within TOLLWAY_TEST_PORTS', async () => {
    const saved = process.env.TOLLWAY_TEST_PORTS;
    process.env.TOLLWAY_TEST_PORTS = '22000-22999';
    try {
      for (let i = 0; i < 5; i++) {
        const port = await freePort();
        expect(port).toBeGreaterThanOrEqual(22000);
        expect(port).toBeLessThanOrEqual(22999);
      }
    } finally {
      if (saved === undefined) delete process.env.TOLLWAY_TEST_PORTS;
      else process.env.TOLLWAY_TEST_PORTS = saved;
    }
  });
});
