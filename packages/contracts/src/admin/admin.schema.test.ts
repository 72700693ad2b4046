import { CreateApiKeyRequest, CreateOrganizationRequest, DisplayName, UpdateOrganizationRequest } from './admin.schema';

describe('DisplayName (organization and key names)', () => {
  it.each([
    ['Acme'],
    ['Ünïcødé 名前 😀'],
    ['a'.repeat(200)],
    ['  padded  '],
    ['tab\u00a0nbsp'],
    ['שלום עולם'],
    ['مرحبا Acme'],
    ['👨\u200D👩\u200D👧 family'],
    ['می\u200Cخواهم'],
    ['❤\uFE0F heart, 👍🏽 thumbs'],
    ['keycap #\uFE0F\u20E3 and 1\uFE0F\u20E3'],
    ['🏳\uFE0F\u200D🌈 flag'],
    ['葛\u{E0100} with an ideographic variation selector'],
    ['soft\u00a0space and a real ⠁ braille letter'],
  ])('accepts %p', (name) => {
    expect(DisplayName.safeParse(name).success).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['only spaces', '   '],
    ['longer than 200', 'a'.repeat(201)],
    ['a NUL', 'a\u0000b'],
    ['an escape', 'a\u001b[31mred'],
    ['a line break', 'a\nb'],
    ['a carriage return', 'a\rb'],
    ['a C1 control', 'a\u0085b'],
    ['a DEL', 'a\u007fb'],
    ['a lone high surrogate', 'a\ud800'],
    ['a lone low surrogate', '\udc00a'],
    ['a right-to-left override', 'Acme\u202Eevil'],
    ['a left-to-right isolate', 'a\u2066b'],
    ['a right-to-left mark', 'a\u200Fb'],
    ['an Arabic letter mark', 'a\u061Cb'],
    ['a line separator', 'a\u2028b'],
    ['a paragraph separator', 'a\u2029b'],
    ['a zero-width space', 'Ac\u200Bme'],
    ['a byte order mark', '\uFEFFAcme'],
    ['a soft hyphen alone', '\u00AD'],
    ['a Hangul filler', '\u3164'],
    ['a Hangul choseong filler', '\u115F'],
    ['a halfwidth Hangul filler', 'a\uFFA0b'],
    ['the blank braille pattern', '\u2800'],
    ['a deprecated format control', 'a\u206Ab'],
    ['a combining grapheme joiner', 'a\u034Fb'],
    ['a Mongolian vowel separator', 'a\u180Eb'],
    ['tag characters hiding text', 'prod\u{E0069}\u{E0067}\u{E006E}'],
    ['a noncharacter', 'a\uFFFEb'],
    ['a noncharacter of the FDD0 block', 'a\uFDD0b'],
    ['a plane-end noncharacter', 'a\u{1FFFF}b'],
    ['only a joiner', '\u200D'],
    ['only joiners', '\u200C\u200C\u200C'],
    ['only a variation selector', '\uFE0F'],
    ['a joiner between Latin letters', 'Ac\u200Dme'],
    ['a variation selector after a Latin letter', 'Ac\uFE00me'],
    ['an interlinear annotation', 'a\uFFF9b'],
    ['a joiner at the end', '👍\u200D'],
  ])('refuses %s', (_what, name) => {
    expect(DisplayName.safeParse(name).success).toBe(false);
  });

  it('is the name of an organization created or renamed, and of a key', () => {
    const budgets = { requests: 1, input_tokens: 1, output_tokens: 1 };
    expect(CreateOrganizationRequest.safeParse({ name: 'a\nb', budgets }).success).toBe(false);
    expect(UpdateOrganizationRequest.safeParse({ name: '\u0000' }).success).toBe(false);
    expect(CreateApiKeyRequest.safeParse({ name: 'k\u001b' }).success).toBe(false);
    expect(CreateApiKeyRequest.safeParse({ name: 'k' }).success).toBe(true);
  });
});

describe('session limits', () => {
  const org = { name: 'Acme', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } };
  const paramOf = (result: { success: boolean; error?: { issues: Array<{ path: PropertyKey[] }> } }) =>
    result.error?.issues[0]?.path.join('.');

  it('are optional on create, any subset (null = the default), and count as a field given on update', () => {
    expect(CreateOrganizationRequest.parse(org).session_limits).toBeUndefined();
    const limits = { sessions: 1_000_000_000, running_turns: 1_000_000, waiting_turns: 1, weight: null };
    expect(CreateOrganizationRequest.parse({ ...org, session_limits: limits }).session_limits).toEqual(limits);
    expect(UpdateOrganizationRequest.parse({ session_limits: { weight: 1000 } })).toEqual({
      session_limits: { weight: 1000 },
    });
    expect(UpdateOrganizationRequest.parse({ session_limits: { running_turns: null } })).toEqual({
      session_limits: { running_turns: null },
    });
    expect(UpdateOrganizationRequest.safeParse({ session_limits: {} }).success).toBe(true);
    expect(UpdateOrganizationRequest.safeParse({}).success).toBe(false);
  });

  it.each([
    [{ sessions: 0 }, 'session_limits.sessions'],
    [{ sessions: 1_000_000_001 }, 'session_limits.sessions'],
    [{ running_turns: 1_000_001 }, 'session_limits.running_turns'],
    [{ waiting_turns: 1_000_000_001 }, 'session_limits.waiting_turns'],
    [{ weight: 1001 }, 'session_limits.weight'],
    [{ weight: 0 }, 'session_limits.weight'],
    [{ weight: -1 }, 'session_limits.weight'],
    [{ weight: 1.5 }, 'session_limits.weight'],
    [{ weight: 1e308 }, 'session_limits.weight'],
    [{ weight: '3' }, 'session_limits.weight'],
    [{ weight: true }, 'session_limits.weight'],
    [{ weight: [3] }, 'session_limits.weight'],
    [{ weight: { value: 3 } }, 'session_limits.weight'],
    [{ sessions: 2 ** 53 + 1 }, 'session_limits.sessions'],
    [{ wieght: 3 }, 'session_limits'],
    [null, 'session_limits'],
    [[], 'session_limits'],
    ['default', 'session_limits'],
  ])('refuses %p at %s, on create and update', (limits, param) => {
    expect(paramOf(CreateOrganizationRequest.safeParse({ ...org, session_limits: limits }))).toBe(param);
    expect(paramOf(UpdateOrganizationRequest.safeParse({ session_limits: limits }))).toBe(param);
  });
});
