import { issuePaths } from '../__fixtures__/issues';
import {
  formatRateLimitDuration,
  parseRateLimitDuration,
  RATE_LIMIT_HEADERS,
  RateLimitHeaders,
} from './rate-limit-headers';

describe('formatRateLimitDuration', () => {
  it.each([
    [0, '0s'],
    [-5, '0s'],
    [0.2, '1ms'],
    [250, '250ms'],
    [999, '999ms'],
    [1000, '1s'],
    [1500, '1.5s'],
    [1234.5, '1.235s'],
    [59_999, '59.999s'],
    [60_000, '1m0s'],
    [360_000, '6m0s'],
    [361_200, '6m2s'],
    [3_723_000, '1h2m3s'],
  ])('%p ms → %s', (ms, text) => {
    expect(formatRateLimitDuration(ms)).toBe(text);
  });
});

describe('parseRateLimitDuration', () => {
  it.each([
    ['0s', 0],
    ['250ms', 250],
    ['1s', 1000],
    ['1.5s', 1500],
    ['6m0s', 360_000],
    ['6m', 360_000],
    ['1h2m3s', 3_723_000],
    ['1s500ms', 1500],
  ])('%s → %p ms', (text, ms) => {
    expect(parseRateLimitDuration(text)).toBe(ms);
  });

  it.each(['', '1', '1 s', 's', '-1s', '1.5ms', 'abc', '1d'])('refuses %p', (text) => {
    expect(parseRateLimitDuration(text)).toBeNull();
  });

  it.each([0, 1, 250, 1000, 1500, 59_999, 360_000, 3_723_000])('round-trips %p ms', (ms) => {
    expect(parseRateLimitDuration(formatRateLimitDuration(ms))).toBe(ms);
  });
});

describe('RateLimitHeaders', () => {
  const headers = {
    [RATE_LIMIT_HEADERS.limitRequests]: '60',
    [RATE_LIMIT_HEADERS.remainingRequests]: '59',
    [RATE_LIMIT_HEADERS.resetRequests]: '1s',
    [RATE_LIMIT_HEADERS.limitTokens]: '100000',
    [RATE_LIMIT_HEADERS.remainingTokens]: '99000',
    [RATE_LIMIT_HEADERS.resetTokens]: '0s',
  };

  it('accepts the six headers of a 200', () => {
    expect(issuePaths(RateLimitHeaders, headers)).toEqual([]);
  });

  it.each([
    ['a missing header', { [RATE_LIMIT_HEADERS.limitTokens]: undefined }, RATE_LIMIT_HEADERS.limitTokens],
    ['a negative balance', { [RATE_LIMIT_HEADERS.remainingRequests]: '-1' }, RATE_LIMIT_HEADERS.remainingRequests],
    ['a fractional limit', { [RATE_LIMIT_HEADERS.limitRequests]: '1.5' }, RATE_LIMIT_HEADERS.limitRequests],
    ['a reset with a blank', { [RATE_LIMIT_HEADERS.resetRequests]: '1 s' }, RATE_LIMIT_HEADERS.resetRequests],
    ['an empty reset', { [RATE_LIMIT_HEADERS.resetTokens]: '' }, RATE_LIMIT_HEADERS.resetTokens],
  ])('refuses %s', (_name, patch, path) => {
    const value = JSON.parse(JSON.stringify({ ...headers, ...patch }));
    expect(issuePaths(RateLimitHeaders, value)).toEqual([path]);
  });
});
