import { FINISH_REASONS } from '@tollway/contracts';
import { normaliseFinishReasons, specFinishReason } from './finish-reason';

describe('specFinishReason', () => {
  it("keeps the spec's reasons, null and absence", () => {
    for (const reason of FINISH_REASONS) expect(specFinishReason(reason)).toBe(reason);
    expect(specFinishReason(null)).toBeNull();
    expect(specFinishReason(undefined)).toBeUndefined();
  });

  it.each([
    ['eos', 'stop'],
    ['EOS_TOKEN', 'stop'],
    ['end_turn', 'stop'],
    ['abort', 'stop'],
    ['max_tokens', 'length'],
    ['model_length', 'length'],
    ['tool_use', 'tool_calls'],
    ['function_call', 'tool_calls'],
    ['safety', 'content_filter'],
    ['something new', 'stop'],
    ['', null],
    [7, 'stop'],
    [false, null],
  ])('translates %p to %p', (reason, expected) => {
    expect(specFinishReason(reason)).toBe(expected);
  });
});

describe('normaliseFinishReasons', () => {
  it('rewrites the choices in place and says whether one changed', () => {
    const choices: Array<{ finish_reason?: unknown }> = [{ finish_reason: 'eos' }, { finish_reason: null }, {}];
    expect(normaliseFinishReasons(choices)).toBe(true);
    expect(choices).toEqual([{ finish_reason: 'stop' }, { finish_reason: null }, {}]);
    expect(normaliseFinishReasons(choices)).toBe(false);
    expect(normaliseFinishReasons([null as unknown as { finish_reason?: unknown }])).toBe(false);
  });
});
