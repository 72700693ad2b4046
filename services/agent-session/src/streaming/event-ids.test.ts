import * as fc from 'fast-check';
import { compareEventIds, parseEventId } from './event-ids';

describe('event ids', () => {
  it('parses <ms>-<seq> of two 64-bit unsigned numbers into the form Redis writes', () => {
    expect(parseEventId('1712345678901-0')).toBe('1712345678901-0');
    expect(parseEventId('0007-01')).toBe('7-1');
    expect(parseEventId('18446744073709551615-18446744073709551615')).toBe('18446744073709551615-18446744073709551615');
  });

  it.each([
    '',
    '1',
    '1-',
    '-1',
    '1-2-3',
    '1.5-0',
    ' 1-0',
    '1-0 ',
    '0x1-0',
    '18446744073709551616-0',
    '1-18446744073709551616',
    '١-٠',
  ])('refuses %j', (raw) => {
    expect(parseEventId(raw)).toBeNull();
  });

  it('orders ids as the pairs of numbers they are', () => {
    const part = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
    fc.assert(
      fc.property(part, part, part, part, (am, as, bm, bs) => {
        const expected = am === bm ? (as === bs ? 0 : as < bs ? -1 : 1) : am < bm ? -1 : 1;
        expect(Math.sign(compareEventIds(`${am}-${as}`, `${bm}-${bs}`))).toBe(expected);
      }),
    );
  });
});
