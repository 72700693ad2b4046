import * as fc from 'fast-check';
import { ByteString, Deep, Entries, LongString, RawToken, Repeat, type JsonNode } from './hostile-json';

/** A hostile value and whether JSON that holds it is invalid (so the request must be refused). */
export interface Hostile {
  node: JsonNode;
  label: string;
  invalidJson: boolean;
}

const h = (node: JsonNode, label: string, invalidJson = false): Hostile => ({ node, label, invalidJson });

/** Numbers at the edges: 2^31, 2^53, 1e308, -0, overflow, underflow, and tokens JSON does not allow. */
export const SPECIAL_NUMBER_TOKENS = [
  '0',
  '-0',
  '-1',
  '1',
  '2',
  '0.5',
  '1.5',
  '-2.000001',
  '2.000001',
  '100',
  '128',
  '129',
  '256',
  '257',
  '1000',
  '1025',
  '65536',
  '100000000',
  '2147483647',
  '2147483648',
  '-2147483649',
  '4294967296',
  '9007199254740991',
  '9007199254740992',
  '9007199254740993',
  '-9007199254740993',
  '1e308',
  '-1e308',
  '1e309',
  '-1e309',
  '1e-400',
  '5e-324',
  '123456789012345678901234567890',
  '1E2',
  '0.0000001',
] as const;
const INVALID_NUMBER_TOKENS = [
  'NaN',
  'Infinity',
  '-Infinity',
  '0x10',
  '+1',
  '.5',
  '01',
  '1.',
  '--1',
  '1e',
  'nan',
] as const;

/** Strings that break what they later land in: headers, URLs, file names, logs, terminals. */
const HOSTILE_STRINGS = [
  '',
  ' ',
  'a',
  'secret€',
  '日本語のテキスト',
  '😀🎉',
  'Zalgo̴̡͕̼ͭ',
  '\u202eevil',
  '\ufeffbom',
  '\u2028\u2029',
  '\u0000',
  'a\u0000b',
  '\u0007bell',
  '\u001b[31mred',
  '\t',
  'line\nbreak',
  'x\r\nX-Injected: 1',
  'x\r\n\r\nHTTP/1.1 200 OK',
  '\u0085',
  '\u00ff',
  '\ud800',
  '\udfff\ud800',
  '%',
  '%zz',
  '%00',
  '%C0%AF',
  '../../etc/passwd',
  '..\\..\\boot.ini',
  '/',
  '//',
  '?',
  '#',
  'http://127.0.0.1:1/',
  'https://[::1]:0/',
  'ftp://example.com/',
  'javascript:alert(1)',
  'file:///etc/passwd',
  'http://a b/',
  'http://user:pa ss@127.0.0.1/',
  'http://127.0.0.1:99999/',
  'http://%zz/',
  'http://[/',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'null',
  'true',
  '0',
  '-0',
  'NaN',
  '1e308',
  '2147483648',
  'Bearer x',
  '{"a":1}',
  '<script>',
  "' OR 1=1 --",
  '${jndi:ldap://x}',
] as const;

/** Lengths at and past the bounds an implementation is likely to pick. */
export const LENGTHS = [
  0, 1, 63, 64, 65, 100, 101, 127, 128, 129, 200, 201, 255, 256, 257, 1000, 1024, 1025, 2048, 4096, 4097, 8192, 65536,
  65537, 100_000, 1_048_577,
] as const;
/** Array sizes at and past likely bounds. */
export const COUNTS = [
  0, 1, 2, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 257, 300, 1000, 1025, 2049, 10_000, 100_000,
] as const;
/** Nesting depths, some far past any recursive parser or serializer's stack. */
export const DEPTHS = [2, 16, 32, 33, 64, 65, 100, 128, 256, 512, 1000, 5000, 10_000, 100_000] as const;

/** Invalid UTF-8: a lone continuation, overlong forms, a UTF-16 surrogate, bytes never valid, a cut sequence. */
const INVALID_UTF8 = [
  [0x80],
  [0xff],
  [0xfe, 0xff],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
  [0xc3],
  [0x00],
] as const;

const specialNumber = fc.constantFrom(...SPECIAL_NUMBER_TOKENS).map((text) => h(new RawToken(text), `number ${text}`));
const invalidNumber = fc
  .constantFrom(...INVALID_NUMBER_TOKENS)
  .map((text) => h(new RawToken(text), `token ${text}`, true));
const numberAsText = fc
  .constantFrom('NaN', 'Infinity', '1e308', '2147483648', '-0', '', '1')
  .map((text) => h(text, `number as text "${text}"`));
const wrongType = fc
  .constantFrom<[JsonNode, string]>(
    [true, 'true'],
    [false, 'false'],
    [null, 'null'],
    [[], '[]'],
    [{}, '{}'],
    [[1, 'a'], '[1,"a"]'],
    [{ a: 1 }, '{"a":1}'],
    ['', '""'],
    ['x', '"x"'],
    [0, '0'],
    [[[]], '[[]]'],
  )
  .map(([node, label]) => h(node, `type ${label}`));
const hostileString = fc.constantFrom(...HOSTILE_STRINGS).map((s) => h(s, `string ${JSON.stringify(s)}`));
const invalidUtf8 = fc
  .tuple(fc.constantFrom(...INVALID_UTF8), fc.constantFrom('', 'token-'), fc.constantFrom('', '-end'))
  .map(([bytes, before, after]) =>
    h(new ByteString(bytes, before, after), `invalid UTF-8 ${bytes.map((b) => b.toString(16)).join(' ')}`),
  );
const rawControl = fc
  .integer({ min: 0, max: 0x1f })
  .map((code) => h(new ByteString([code], 'a', 'b'), `raw control byte 0x${code.toString(16)} in a string`, true));
const longString = fc
  .tuple(fc.constantFrom(...LENGTHS), fc.constantFrom('a', '€', '😀', ' ', '\u0000', 'ab'))
  .map(([length, unit]) => h(new LongString(unit, length), `string of ${length} × ${JSON.stringify(unit)}`));
const deep = fc
  .tuple(fc.constantFrom(...DEPTHS), fc.constantFrom<'array' | 'object'>('array', 'object'))
  .map(([depth, shape]) => h(new Deep(depth, shape), `${shape} nested ${depth} deep`));
const duplicateKeys = fc
  .tuple(fc.constantFrom('role', 'content', 'model', 'url', 'token', 'a', '__proto__'), wrongType, specialNumber)
  .map(([key, a, b]) =>
    h(
      new Entries([
        [key, a.node],
        [key, b.node],
      ]),
      `object with key ${key} twice`,
    ),
  );
const hostileKeys = fc
  .constantFrom('__proto__', 'constructor', '', 'a'.repeat(10_000), '€', '\u0000', 'x\r\ny', 'toString')
  .map((key) => h(new Entries([[key, { polluted: true }]]), `object with key ${JSON.stringify(key.slice(0, 20))}`));
const bigArray = fc
  .tuple(fc.constantFrom(...COUNTS), fc.constantFrom<JsonNode>(1, 'x', {}, [], null))
  .map(([count, item]) => h(new Repeat(item, count), `array of ${count} × ${JSON.stringify(item)}`));

/** Any hostile JSON value, weighted so that every family shows up in a few hundred cases. */
export const hostileValue: fc.Arbitrary<Hostile> = fc.oneof(
  { weight: 4, arbitrary: specialNumber },
  { weight: 1, arbitrary: invalidNumber },
  { weight: 1, arbitrary: numberAsText },
  { weight: 3, arbitrary: wrongType },
  { weight: 4, arbitrary: hostileString },
  { weight: 2, arbitrary: invalidUtf8 },
  { weight: 1, arbitrary: rawControl },
  { weight: 2, arbitrary: longString },
  { weight: 2, arbitrary: deep },
  { weight: 1, arbitrary: duplicateKeys },
  { weight: 1, arbitrary: hostileKeys },
  { weight: 2, arbitrary: bigArray },
);

/** Values for a parameter that drives work or memory: edge numbers, long strings and arrays, nesting. */
export const boundValue: fc.Arbitrary<Hostile> = fc.oneof(
  { weight: 5, arbitrary: specialNumber },
  { weight: 1, arbitrary: numberAsText },
  { weight: 2, arbitrary: bigArray },
  { weight: 2, arbitrary: longString },
  { weight: 3, arbitrary: hostileString },
  { weight: 1, arbitrary: invalidUtf8 },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: wrongType },
);

/** Hostile path segments: broken percent-encoding, traversal, control and non-Latin-1 characters, huge. */
export const hostileSegment = fc.constantFrom(
  '%',
  '%zz',
  '%2',
  '%%',
  '%C0%AF',
  '%00',
  '%ff',
  '%ED%A0%80',
  '%2e%2e',
  '..',
  '.',
  '',
  'a%2Fb',
  '%E2%82%AC',
  '€',
  '日本',
  '\u0000',
  '%0d%0aX-Injected:%201',
  'x'.repeat(300),
  'x'.repeat(9000),
  '00000000-0000-0000-0000-00000000000g',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  '{sessionId}x',
  ' ',
  '%20',
  '+',
  ';',
  ':',
  '@',
  '*',
);

/** Hostile query strings, for every endpoint (most ignore them, some parse them). */
export const hostileQuery = fc.constantFrom(
  'wait=%',
  'wait=%zz',
  'wait=true&wait=false',
  'wait[a]=1',
  'wait=true&timeout=NaN',
  'wait=true&timeout=1e308',
  'wait=true&timeout=-0',
  'wait=true&timeout=2147483648',
  'wait=true&timeout=-1',
  'wait=true&timeout=0x10',
  'wait=true&timeout=Infinity',
  'timeout[a]=1',
  'timeout=1&timeout=2',
  'wait=yes',
  'minutes=0',
  'minutes=121',
  'minutes=1e308',
  'minutes=%',
  'minutes[]=1',
  // The event stream's: follow and the resume id.
  'follow=%',
  'follow=yes',
  'follow[]=1',
  'follow=true&follow=false',
  'last_event_id=%00',
  'last_event_id=-1-0',
  'last_event_id=1-0&last_event_id=2-0',
  'last_event_id[a]=1',
  'last_event_id=18446744073709551616-0',
  'last_event_id=18446744073709551615-18446744073709551615&follow=1',
  `last_event_id=${'9'.repeat(5000)}-0`,
  'last_event_id=0-0&follow=true',
  'a'.repeat(10_000),
  '&&&',
  '=',
  '%00=%00',
  'a[b][c][d][e][f][g]=1',
  Array.from({ length: 2000 }, (_, i) => `p${i}=1`).join('&'),
);
