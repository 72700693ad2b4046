import type { CatalogModel } from '../catalog/catalog.schema';
import { outputReservation } from '../admission/output-reservation';
import { usableUsage, usageBoundsOf } from './usage-bounds';

const model = { context_length: 1000 } as unknown as CatalogModel;

describe('usage bounds', () => {
  it('bounds a prompt by the context length and a completion by max_tokens times n', () => {
    expect(usageBoundsOf({ max_tokens: 50, n: 3 }, model, 100)).toEqual({
      maxPromptTokens: 1000,
      maxCompletionTokens: 150,
    });
    expect(usageBoundsOf({ max_completion_tokens: 20, max_tokens: 50 }, model, 100).maxCompletionTokens).toBe(20);
    expect(usageBoundsOf({}, model, 100).maxCompletionTokens).toBe(900);
    expect(usageBoundsOf({ n: 2 }, model, 1000)).toEqual({ maxPromptTokens: 1000, maxCompletionTokens: 2 });
  });

  const bounds = { maxPromptTokens: 1000, maxCompletionTokens: 150 };

  it('uses counts within the bounds as they are, and cuts counts above them', () => {
    const usage = { prompt_tokens: 10, completion_tokens: 150, total_tokens: 160 };
    expect(usableUsage(usage, bounds)).toBe(usage);
    expect(usableUsage({ prompt_tokens: 2 ** 40, completion_tokens: 151, total_tokens: 1 }, bounds)).toEqual({
      prompt_tokens: 1000,
      completion_tokens: 150,
      total_tokens: 1150,
    });
  });

  it('keeps details of the contract, and drops the ones a client could not parse', () => {
    const counts = { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 };
    const fine = {
      ...counts,
      prompt_tokens_details: { cached_tokens: 4 },
      completion_tokens_details: { reasoning_tokens: 20, accepted_prediction_tokens: 0 },
    };
    expect(usableUsage(fine, bounds)).toBe(fine);
    const nulls = { ...counts, prompt_tokens_details: null, completion_tokens_details: null };
    expect(usableUsage(nulls, bounds)).toBe(nulls);
    for (const reasoning of ['lots', -1, 1.5, 21, null, 1e308]) {
      const usage = {
        ...counts,
        prompt_tokens_details: { cached_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: reasoning },
      };
      expect(usableUsage(usage, bounds)).toEqual({ ...counts, prompt_tokens_details: { cached_tokens: 4 } });
    }
    // Every count of the details, not only reasoning_tokens; the details that fit are kept.
    const cached = { cached_tokens: 4 };
    for (const bad of [
      { cached_tokens: 'lots' },
      { cached_tokens: 11 },
      { audio_tokens: { nested: 1 } },
      { cached_tokens: 2, other: -1 },
    ]) {
      expect(
        usableUsage(
          { ...counts, prompt_tokens_details: bad, completion_tokens_details: { reasoning_tokens: 5 } },
          bounds,
        ),
      ).toEqual({ ...counts, completion_tokens_details: { reasoning_tokens: 5 } });
    }
    for (const bad of [{ accepted_prediction_tokens: 'x' }, { rejected_prediction_tokens: 21 }, { audio_tokens: [] }]) {
      expect(usableUsage({ ...counts, prompt_tokens_details: cached, completion_tokens_details: bad }, bounds)).toEqual(
        {
          ...counts,
          prompt_tokens_details: cached,
        },
      );
    }
    for (const details of ['x', 5, [1], true]) {
      expect(
        usableUsage({ ...counts, prompt_tokens_details: details, completion_tokens_details: details }, bounds),
      ).toEqual(counts);
    }
  });

  it.each([
    ['null', null],
    ['a number', 5],
    ['a missing count', { prompt_tokens: 1, completion_tokens: 1 }],
    ['a negative', { prompt_tokens: -5, completion_tokens: 1, total_tokens: 1 }],
    ['a fraction', { prompt_tokens: 5, completion_tokens: 1.5, total_tokens: 6.5 }],
    ['1e308', { prompt_tokens: 1e308, completion_tokens: 1, total_tokens: 1e308 }],
    ['2^53', { prompt_tokens: 1, completion_tokens: 2 ** 53, total_tokens: 2 ** 53 }],
    ['a string', { prompt_tokens: '5', completion_tokens: 1, total_tokens: 6 }],
  ])('does not use %s', (_name, value) => {
    expect(usableUsage(value, bounds)).toBeNull();
  });

  it('reserves max_tokens, or the default, for each of the n choices', () => {
    expect(outputReservation({ max_tokens: 900, n: 128 }, 1024)).toEqual({ tokens: 115200, isDefault: false });
    expect(outputReservation({ max_completion_tokens: 7 }, 1024)).toEqual({ tokens: 7, isDefault: false });
    expect(outputReservation({ n: 3 }, 1024)).toEqual({ tokens: 3072, isDefault: true });
  });
});
