import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { testPortRange } from './test-port-config';

/** Linux's default ephemeral range, for systems that do not show theirs. */
const DEFAULT_EPHEMERAL_RANGE: readonly [number, number] = [32768, 60999];
/** The lowest port handed out here: clear of the well-known and most registered services' ports. */
const LOWEST_PORT = 10000;
const ATTEMPTS = 64;

/** The ports the kernel hands to `listen(0)` and to outgoing connections. */
export function ephemeralPortRange(): readonly [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high) && low! > 0 && high! >= low!) return [low!, high!];
  } catch {
    // not Linux, or no procfs: assume the default
  }
  return DEFAULT_EPHEMERAL_RANGE;
}

/** True when a server can listen on 127.0.0.1:`port` now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port the kernel picked (`listen(0)`), released at once. */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 for a process started later (or started again on the same port),
 * picked at random from TOLLWAY_TEST_PORTS when set, else below the kernel's ephemeral range. A port from that range, once released, can
 * be handed to any process's `listen(0)` or outgoing connection before the caller binds it again:
 * with tests running side by side, a spawned service then fails with EADDRINUSE while another
 * test's server answers on its port (the adversarial suite once took such a server's 200 for its
 * session service being ready). Below the range only an explicit bind can take it. Where the range
 * starts too low to leave room, falls back to the kernel's pick.
 */
export async function freePort(): Promise<number> {
  const range = testPortRange();
  if (range) return freePortBetween(range[0], range[1] + 1);
  const [low] = ephemeralPortRange();
  return low - LOWEST_PORT < 1000 ? kernelPort() : freePortBetween(LOWEST_PORT, low);
}

/** A port from `from` (inclusive) to `to` (exclusive) that a server can listen on now, tried at random. */
export async function freePortBetween(from: number, to: number, attempts = ATTEMPTS): Promise<number> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    const port = randomInt(from, to);
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found in ${attempts} tries from ${from} to ${to}`);
}
