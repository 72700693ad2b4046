import { AddressPolicy, AddressRefusedError } from './address-policy';

describe('AddressPolicy', () => {
  const strict = new AddressPolicy();

  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    '::7f00:1', // [::127.0.0.1] in a URL, as the lookup sees it
    '::a00:1',
    '::808:808', // IPv4-compatible, deprecated: refused even around a public address
  ])('refuses %s by default', (address) => {
    expect(strict.allowsAddress(address)).toBe(false);
  });

  it.each(['8.8.8.8', '1.1.1.1', '2001:4860:4860::8888', '::ffff:8.8.8.8'])('allows public %s', (address) => {
    expect(strict.allowsAddress(address)).toBe(true);
  });

  it('lets the allow-list permit addresses, CIDRs and host names', () => {
    const policy = new AddressPolicy(['127.0.0.1', '10.0.0.0/8', 'Hooks.Internal', 'fd00::/8']);
    expect(policy.allowsAddress('127.0.0.1')).toBe(true);
    expect(policy.allowsAddress('::ffff:127.0.0.1')).toBe(true);
    expect(policy.allowsAddress('127.0.0.2')).toBe(false);
    expect(policy.allowsAddress('10.200.1.1')).toBe(true);
    expect(policy.allowsAddress('fd00::5')).toBe(true);
    expect(policy.allowsHost('hooks.internal')).toBe(true);
    expect(policy.allowsHost('other.internal')).toBe(false);
  });

  it('refuses an address literal unless allowed', () => {
    expect(() => strict.checkLiteral('127.0.0.1')).toThrow(AddressRefusedError);
    expect(() => strict.checkLiteral('8.8.8.8')).not.toThrow();
    expect(() => strict.checkLiteral('example.com')).not.toThrow();
  });

  it('fails a lookup of a name that resolves to loopback, and passes it when the name is allowed', async () => {
    const lookup = (policy: AddressPolicy) =>
      new Promise<unknown>((resolve, reject) =>
        policy.lookup('localhost', { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
      );
    await expect(lookup(strict)).rejects.toBeInstanceOf(AddressRefusedError);
    await expect(lookup(new AddressPolicy(['localhost']))).resolves.toEqual(
      expect.arrayContaining([expect.objectContaining({ address: expect.any(String) })]),
    );
  });
});
