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

  // Reads as undici hands them over: Buffers, most ending on an event's "\n" (the native decode),
  // some ending inside a character (the streaming decoder).
  it('decodes Buffer reads alike whether a read ends inside a character or not', () => {
    const parser = new SseParser();
    const euro = Buffer.from('data: €\n\n');
    const reads = [
      Buffer.from('data: a\n\n'),
      Buffer.from('data: b\n\n'),
      euro.subarray(0, 7), // "data: " and the first byte of "€"
      euro.subarray(7, 8), // its second byte: the decoder still holds a part
      Buffer.alloc(0), // an empty read changes nothing
      euro.subarray(8), // its last byte and the blank line
      Buffer.from('data: c€\n\ndata: d\n\n'),
    ];
    expect(reads.flatMap((read) => parser.push(read))).toEqual(['a', 'b', '€', 'c€', 'd']);
  });

  it('drops a byte order mark at the start of the stream, and only there', () => {
    const parser = new SseParser();
    expect(parser.push(Buffer.from('\uFEFFdata: x\n\n'))).toEqual(['x']);
    expect(parser.push(Buffer.from('data: \uFEFFy\n\n'))).toEqual(['\uFEFFy']);
  });

  it('replaces malformed bytes with U+FFFD on either path', () => {
    const parser = new SseParser();
    const malformed = (prefix: string) =>
      Buffer.concat([Buffer.from(prefix), Buffer.from([0xe2, 0x28, 0xa1, 0xff]), Buffer.from('\n\n')]);
    expect(parser.push(malformed('data: '))).toEqual(['\uFFFD(\uFFFD\uFFFD']); // the first read: the decoder
    expect(parser.push(malformed('data: '))).toEqual(['\uFFFD(\uFFFD\uFFFD']); // later: the native decode
    expect(parser.push(Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xe2]))).toEqual([]); // "data: " + a lead byte
    expect(parser.push(Buffer.from('x\n\n'))).toEqual(['\uFFFDx']); // the decoder ends the broken character
  });
});
