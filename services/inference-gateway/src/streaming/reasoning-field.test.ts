import { renameChoicesReasoning, renameReasoning } from './reasoning-field';

describe('renameReasoning', () => {
  it('moves a trace named `reasoning` to `reasoning_content`', () => {
    const delta: Record<string, unknown> = { reasoning: 'Let me think.' };
    expect(renameReasoning(delta)).toBe(true);
    expect(delta).toEqual({ reasoning_content: 'Let me think.' });
  });

  it('keeps a `reasoning_content` that holds text, dropping the copy an engine sent under both names', () => {
    const both: Record<string, unknown> = { reasoning: 'a', reasoning_content: 'a' };
    expect(renameReasoning(both)).toBe(true);
    expect(both).toEqual({ reasoning_content: 'a' });
    const emptyContent: Record<string, unknown> = { reasoning: 'b', reasoning_content: null };
    renameReasoning(emptyContent);
    expect(emptyContent).toEqual({ reasoning_content: 'b' });
  });

  it.each([
    ['no trace', { content: 'hi' }],
    ['a null `reasoning`', { reasoning: null }],
    ['an object `reasoning`', { reasoning: { effort: 'high' } }],
  ])('leaves %s alone', (_name, part) => {
    const copy = structuredClone(part);
    expect(renameReasoning(part)).toBe(false);
    expect(part).toEqual(copy);
  });

  it('renames in the message or delta of every choice, and tells when one changed', () => {
    const choices = [{ delta: { content: 'x' } }, { message: { reasoning: 'y' } }, null as never];
    expect(renameChoicesReasoning(choices)).toBe(true);
    expect(choices[1]).toEqual({ message: { reasoning_content: 'y' } });
    expect(renameChoicesReasoning([{ delta: { content: 'x' } }])).toBe(false);
  });
});
