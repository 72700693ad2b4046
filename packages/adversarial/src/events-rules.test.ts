import { eventsRuleBreak } from './events-rules';

const usage = (completion: number) => ({
  prompt_tokens: 5,
  completion_tokens: completion,
  total_tokens: 5 + completion,
});
const chunk = (choices: object[], extra: object = {}) =>
  JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'a/b', choices, ...extra });
const ROLE = chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
const TOKEN = chunk([{ index: 0, delta: { content: 'x' }, finish_reason: null }], { usage: usage(1) });
const FINISH = chunk([{ index: 0, delta: { content: 'y' }, finish_reason: 'stop' }]);
const TOTALS = chunk([], { usage: usage(2) });
const ERROR = JSON.stringify({
  error: {
    message: 'The engine connection broke mid-stream.',
    type: 'server_error',
    param: null,
    code: 'engine_stream_error',
  },
});
const sse = (...payloads: string[]) => payloads.map((payload) => `data: ${payload}\n\n`).join('');
const judge = (body: string, mayBreak = false) => eventsRuleBreak({ body, mayBreak });

describe('eventsRuleBreak', () => {
  it('accepts a stream that keeps all six rules, with two choices too', () => {
    expect(judge(sse(ROLE, TOKEN, FINISH, TOTALS, '[DONE]'))).toBeNull();
    const two = [0, 1].map((index) => ({ index, delta: { role: 'assistant', content: '' }, finish_reason: null }));
    expect(judge(sse(chunk(two), FINISH, TOTALS, '[DONE]'))).toBeNull();
  });

  it.each([
    ['a frame that is not a data line', `event: x\n${sse(ROLE, TOTALS, '[DONE]')}`, /rule 1/],
    ['a frame that is not JSON', sse(ROLE, '{"id":', TOTALS, '[DONE]'), /rule 1/],
    [
      'a chunk of another object',
      sse(ROLE, TOKEN.replace('chat.completion.chunk', 'chat.completion'), TOTALS, '[DONE]'),
      /rule 1/,
    ],
    ['a chunk without its id', sse(ROLE, TOKEN.replace('"id":"c",', ''), TOTALS, '[DONE]'), /rule 1.*\(id:/],
    [
      'a choice with a finish reason of no such kind',
      sse(ROLE, FINISH.replace('"stop"', '"exploded"'), TOTALS, '[DONE]'),
      /rule 1/,
    ],
    ['a first chunk without the role', sse(TOKEN, TOTALS, '[DONE]'), /rule 2/],
    ['a first chunk with usage', sse(chunk(JSON.parse(ROLE).choices, { usage: usage(0) }), TOTALS, '[DONE]'), /rule 2/],
    [
      'a finish chunk with usage',
      sse(ROLE, chunk(JSON.parse(FINISH).choices, { usage: usage(2) }), TOTALS, '[DONE]'),
      /rule 3/,
    ],
    ['a token chunk without usage', sse(ROLE, chunk(JSON.parse(TOKEN).choices), FINISH, TOTALS, '[DONE]'), /rule 4/],
    [
      'a token chunk with null usage',
      sse(ROLE, chunk(JSON.parse(TOKEN).choices, { usage: null }), TOTALS, '[DONE]'),
      /rule 4/,
    ],
    ['no totals chunk last', sse(ROLE, TOKEN, FINISH, '[DONE]'), /rule 5/],
    ['empty choices before the last', sse(ROLE, TOTALS, TOKEN, TOTALS, '[DONE]'), /rule 5/],
    [
      'totals that do not add up',
      sse(ROLE, chunk([], { usage: { ...usage(2), total_tokens: 3 } }), '[DONE]'),
      /rule 5/,
    ],
    ['no [DONE]', sse(ROLE, TOKEN, FINISH, TOTALS), /rule 6/],
    ['an error event where the engine is healthy', sse(ROLE, TOKEN, ERROR), /rule 6/],
    ['a frame cut off', sse(ROLE, TOTALS, '[DONE]').slice(0, -1), /cut off/],
    ['nothing before [DONE]', sse('[DONE]'), /rule 2/],
    ['a negative count', sse(ROLE, chunk(JSON.parse(TOKEN).choices, { usage: usage(-1) }), TOTALS, '[DONE]'), /rule 4/],
    [
      'text after the finish, in a later chunk',
      sse(ROLE, FINISH, TOKEN, TOTALS, '[DONE]'),
      /after the chunk that carries its finish_reason/,
    ],
    [
      'text after the finish, in the same chunk',
      sse(
        ROLE,
        chunk([...JSON.parse(FINISH).choices, { index: 0, delta: { content: 'z' }, finish_reason: null }]),
        TOTALS,
        '[DONE]',
      ),
      /after the chunk that carries its finish_reason/,
    ],
  ])('names the broken rule: %s', (_name, body, rule) => {
    expect(judge(body)).toMatch(rule);
  });

  it('lets a broken engine end the stream with one error event in the envelope, the rules kept before it', () => {
    expect(judge(sse(ROLE, TOKEN, ERROR), true)).toBeNull();
    expect(judge(sse(ERROR), true)).toBeNull();
    expect(judge(sse(ROLE, TOKEN, FINISH, TOTALS, '[DONE]'), true)).toBeNull();
    expect(judge(sse(ROLE, TOKEN, '{"message":"flat"}'), true)).toMatch(/not an error event/);
    expect(judge(sse(ROLE, chunk(JSON.parse(TOKEN).choices), ERROR), true)).toMatch(/rule 4/);
  });
});
