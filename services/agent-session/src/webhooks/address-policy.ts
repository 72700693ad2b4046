import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Which addresses a webhook may be delivered to. Only public unicast addresses are allowed:
 * loopback, private, carrier-grade NAT, link-local, unique-local, multicast, broadcast, unspecified
 * and reserved ranges (IPv4 and IPv6, an IPv4-mapped IPv6 address judged as its IPv4 address, the
 * deprecated IPv4-compatible ::/96 refused whatever it embeds) are
 * refused unless the allow-list (`WEBHOOK_ALLOWED_HOSTS`: host names, addresses and CIDRs) permits them.
 */
export class AddressPolicy {
  private readonly hosts = new Set<string>();
  private readonly ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][] = [];

  /** `allowList` entries: a host name (`hooks.internal`), an address (`127.0.0.1`) or a CIDR (`10.0.0.0/8`). */
  constructor(allowList: readonly string[] = []) {
    for (const raw of allowList) {
      const entry = raw.trim().toLowerCase();
      if (entry === '') continue;
      if (entry.includes('/')) this.ranges.push(ipaddr.parseCIDR(entry));
      else if (ipaddr.isValid(entry)) {
        const address = ipaddr.parse(entry);
        this.ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
      } else this.hosts.add(entry);
    }
  }

  /** Whether the allow-list names this host outright (then any address it resolves to is accepted). */
  allowsHost(hostname: string): boolean {
    return this.hosts.has(hostname.toLowerCase());
  }

  /** Whether a delivery may connect to `address` (an IPv4 or IPv6 literal). */
  allowsAddress(address: string): boolean {
    if (!ipaddr.isValid(address)) return false;
    let parsed = ipaddr.parse(address);
    // ::/96, the deprecated IPv4-compatible form (RFC 4291 2.5.5.1): `[::127.0.0.1]` in a URL
    // reaches the lookup as `::7f00:1`, which ipaddr.js calls unicast. Refused whatever it embeds.
    const ipv4Compatible =
      parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0);
    if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
      parsed = (parsed as ipaddr.IPv6).toIPv4Address();
    }
    for (const [network, bits] of this.ranges) {
      if (network.kind() === parsed.kind() && parsed.match(network, bits)) return true;
    }
    return !ipv4Compatible && parsed.range() === 'unicast';
  }

  /**
   * A `lookup` for `http.request`: resolves the host and fails unless every address is allowed, so
   * the socket connects to exactly the addresses that were checked (no DNS-rebinding gap).
   */
  readonly lookup = (
    hostname: string,
    options: { family?: number | string; all?: boolean },
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    const hostAllowed = this.allowsHost(hostname);
    dnsLookup(hostname, { all: true, family: normalizeFamily(options.family) }, (err, addresses) => {
      if (err) return callback(err, '');
      const refused = hostAllowed ? undefined : addresses.find((entry) => !this.allowsAddress(entry.address));
      if (refused || addresses.length === 0) return callback(new AddressRefusedError(hostname), '');
      if (options.all) return callback(null, addresses);
      const first = addresses[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };

  /** Throws AddressRefusedError when `hostname` is an address literal that is not allowed. */
  checkLiteral(hostname: string): void {
    if (isIP(hostname) !== 0 && !this.allowsHost(hostname) && !this.allowsAddress(hostname)) {
      throw new AddressRefusedError(hostname);
    }
  }
}

function normalizeFamily(family: number | string | undefined): 0 | 4 | 6 {
  if (family === 4 || family === 'IPv4') return 4;
  if (family === 6 || family === 'IPv6') return 6;
  return 0;
}

/** A webhook address refused by the address policy. */
export class AddressRefusedError extends Error {
  readonly code = 'EADDRREFUSED_POLICY';

  constructor(host: string) {
    super(
      `webhook address refused: ${host} resolves to a non-public address that WEBHOOK_ALLOWED_HOSTS does not allow`,
    );
    this.name = 'AddressRefusedError';
  }
}
