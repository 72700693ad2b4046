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

  it('drops a byte order mark that arrives split over the first reads', () => {
    const bom = Buffer.from('\uFEFF');
    for (const cut of [1, 2]) {
      const parser = new SseParser();
      expect(parser.push(bom.subarray(0, cut))).toEqual([]);
      expect(parser.push(Buffer.concat([bom.subarray(cut), Buffer.from('data: x\n\n')]))).toEqual(['x']);
    }
    const oneByOne = new SseParser();
    const bytesOf = Buffer.from('\uFEFFdata: x\n\n');
    expect([...bytesOf].flatMap((byte) => oneByOne.push(Buffer.from([byte])))).toEqual(['x']);
  });

  it('keeps first bytes that only look like the start of a byte order mark', () => {
    const parser = new SseParser();
    expect(parser.push(Buffer.from([0xef]))).toEqual([]);
    expect(parser.push(Buffer.from([0xbb, 0x41]))).toEqual([]); // EF BB 41: two broken bytes, then "A"
    expect(parser.push(Buffer.from('\n\ndata: x\n\n'))).toEqual(['x']); // the broken line had no data field
    const fresh = new SseParser();
    expect(fresh.push(Buffer.from('d'))).toEqual([]);
    expect(fresh.push(Buffer.from('ata: y\n\n'))).toEqual(['y']);
  });

  it('keeps a U+FEFF that starts a later read, on the native and the streaming decode alike', () => {
    const parser = new SseParser();
    expect(parser.push(Buffer.from('data: a\n\ndata: '))).toEqual(['a']);
    expect(parser.push(Buffer.from('\uFEFFb\n\ndata: '))).toEqual(['\uFEFFb']); // native
    const split = Buffer.from('\uFEFFc€\n\n');
    expect(parser.push(split.subarray(0, split.length - 4))).toEqual([]); // ends inside "€": the decoder's first read
    expect(parser.push(split.subarray(split.length - 4))).toEqual(['\uFEFFc€']);
  });

  it('replaces malformed bytes with U+FFFD on either path', () => {
    const parser = new SseParser();
    const malformed = (prefix: string) =>
      Buffer.concat([Buffer.from(prefix), Buffer.from([0xe2, 0x28, 0xa1, 0xff]), Buffer.from('\n\n')]);
    expect(parser.push(malformed('data: '))).toEqual(['\uFFFD(\uFFFD\uFFFD']); // the native decode
    expect(parser.push(malformed('data: '))).toEqual(['\uFFFD(\uFFFD\uFFFD']);
    expect(parser.push(Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xe2]))).toEqual([]); // "data: " + a lead byte
    expect(parser.push(Buffer.from('x\n\n'))).toEqual(['\uFFFDx']); // the decoder ends the broken character
  });
});
