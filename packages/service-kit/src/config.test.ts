import { z } from 'zod';
import {
  ConfigError,
  durationMs,
  envBoolean,
  loadConfig,
  MAX_TIMER_MS,
  portNumber,
  redisUrl,
} from '@tollway/service-kit';

const schema = z.object({
  port: portNumber.default(8080),
  maxSessions: z.coerce.number().int().min(1).default(1000),
  allowCustomIds: envBoolean.default(false),
});
const sources = {
  port: { env: 'PORT', flag: 'port' },
  maxSessions: { env: 'MAX_SESSIONS', flag: 'max-sessions' },
  allowCustomIds: { env: 'ALLOW_CUSTOM_IDS', flag: 'allow-custom-ids', boolean: true },
};

describe('loadConfig', () => {
  it('applies schema defaults when nothing is set', () => {
    expect(loadConfig(schema, sources, { env: {}, argv: [] })).toEqual({
      port: 8080,
      maxSessions: 1000,
      allowCustomIds: false,
    });
  });

  it('reads the environment and lets flags win over it', () => {
    const config = loadConfig(schema, sources, {
      env: { PORT: '9000', MAX_SESSIONS: '5' },
      argv: ['--max-sessions=7', '--allow-custom-ids'],
    });
    expect(config).toEqual({ port: 9000, maxSessions: 7, allowCustomIds: true });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('skips the `--` separator that pnpm passes through to scripts', () => {
    expect(loadConfig(schema, sources, { env: {}, argv: ['--', '--port', '9100'] }).port).toBe(9100);
  });

  it('names the variable and flag of a bad value', () => {
    expect(() => loadConfig(schema, sources, { env: { MAX_SESSIONS: 'lots' }, argv: [] })).toThrow(
      /MAX_SESSIONS \(--max-sessions\)/,
    );
  });

  it.each([' ', ' 9000', '9000 ', '9000\n', '\t'])(
    'refuses a value with blanks around it (%j), naming the variable',
    (value) => {
      // A number of blanks would coerce to 0: a random port, or no timeout at all.
      expect(() => loadConfig(schema, sources, { env: { PORT: value }, argv: [] })).toThrow(
        /PORT \(--port\): must not start or end with blanks/,
      );
      expect(() => loadConfig(schema, sources, { env: {}, argv: ['--port', value] })).toThrow(/PORT/);
    },
  );

  it('refuses unknown options and options without a value', () => {
    expect(() => loadConfig(schema, sources, { env: {}, argv: ['--nope'] })).toThrow(ConfigError);
    expect(() => loadConfig(schema, sources, { env: {}, argv: ['--port'] })).toThrow(/needs a value/);
    // An empty variable reads as unset; an empty flag is a value left out.
    expect(() => loadConfig(schema, sources, { env: {}, argv: ['--port='] })).toThrow(/--port needs a value/);
    expect(loadConfig(schema, sources, { env: { PORT: '' }, argv: [] }).port).toBe(8080);
  });
});

describe('portNumber', () => {
  it.each([
    ['0', 0],
    ['8080', 8080],
    ['65535', 65535],
    [9000, 9000],
  ])('takes %p', (value, port) => expect(portNumber.parse(value)).toBe(port));
  // Number() reads these as 80, 8000, 3 and 1: a listener on a port the setting does not show.
  it.each(['0x50', '8e3', '0b11', '1.0', '-1', '65536', '+80', 'http'])('refuses %p', (value) =>
    expect(portNumber.safeParse(value).success).toBe(false),
  );
  it('names the variable of a port in hex', () => {
    expect(() => loadConfig(schema, sources, { env: { PORT: '0x50' }, argv: [] })).toThrow(
      /PORT \(--port\): must be a port number in decimal digits/,
    );
  });
});

describe('redisUrl', () => {
  it.each([
    'redis://127.0.0.1:6379',
    'rediss://user:pw@cache.internal:6380/2',
    'redis://[::1]:6379',
    '/run/redis.sock',
  ])('takes %s', (address) => expect(redisUrl.safeParse(address).success).toBe(true));
  it.each([
    'notaurl',
    'localhost:6379',
    'http://127.0.0.1:6379',
    'redis://',
    'redis:///0',
    '',
    ' redis://h:1',
    'redis://h:1\n',
  ])('refuses %p', (address) => expect(redisUrl.safeParse(address).success).toBe(false));
});

describe('durationMs', () => {
  it('takes whole ms from its minimum to the longest delay a timer waits', () => {
    expect(durationMs(100).parse('100')).toBe(100);
    expect(durationMs(100).parse(String(MAX_TIMER_MS))).toBe(2_147_483_647);
  });

  it('refuses a delay past it, which Node would run after 1 ms', () => {
    expect(durationMs(0).safeParse(String(MAX_TIMER_MS + 1)).success).toBe(false);
    expect(durationMs(0).safeParse('3000000000').error?.issues[0]?.message).toMatch(/at most 2147483647 ms/);
    expect(durationMs(100).safeParse('99').success).toBe(false);
    expect(durationMs(0).safeParse('1.5').success).toBe(false);
  });
});
