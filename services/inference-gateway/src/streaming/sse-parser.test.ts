import { SseParser } from './sse-parser';

describe('SseParser', () => {
  const bytes = (text: string) => new TextEncoder().encode(text);

  it('splits events across arbitrary byte boundaries, LF and CRLF', () => {
    const parser = new SseParser();
    const input = 'data: {"a":1}\n\ndata: {"b":2}\r\n\r\n: comment\nevent: x\ndata: [DONE]\n\n';
    const out: string[] = [];
    for (let i = 0; i < input.length; i += 3) out.push(...parser.push(bytes(input.slice(i, i + 3))));
    expect(out).toEqual(['{"a":1}', '{"b":2}', '[DONE]']);
  });

  it('joins multi-line data and keeps a multi-byte character split between reads', () => {
    const parser = new SseParser();
    const euro = bytes('data: €\ndata: x\n\n');
    expect(parser.push(euro.slice(0, 7))).toEqual([]);
    expect(parser.push(euro.slice(7))).toEqual(['€\nx']);
  });

  it('joins three data lines, and starts the next event afresh', () => {
    const parser = new SseParser();
    expect(parser.push(bytes('data: a\ndata: b\ndata: c\n\ndata: d\n\n'))).toEqual(['a\nb\nc', 'd']);
  });

  it('returns an event left open at the end', () => {
    const parser = new SseParser();
    expect(parser.push(bytes('data: {"c":3}'))).toEqual([]);
    expect(parser.end()).toEqual(['{"c":3}']);
  });
});
