/**
 * A JSON tree that can say what JSON.stringify cannot: raw number tokens (`NaN`, `-0`, `1e309`),
 * strings holding invalid UTF-8 bytes, objects with duplicate keys, nesting deeper than any
 * recursive serializer survives, huge arrays and strings, and references to values only known
 * when the case is sent (a session id, the webhook sink's URL). Serialized straight to bytes.
 */

/** A token written as is, e.g. `NaN`, `-0`, `9007199254740993`. */
export class RawToken {
  constructor(readonly text: string) {}
}

/** A JSON string whose content is `before`, then raw bytes (often invalid UTF-8), then `after`. */
export class ByteString {
  constructor(
    readonly bytes: readonly number[],
    readonly before = '',
    readonly after = '',
  ) {}
}

/** An object written entry by entry, so a key may repeat. */
export class Entries {
  constructor(readonly entries: ReadonlyArray<readonly [string, JsonNode]>) {}
}

/** `depth` levels of `[` (or `{"a":`) around `leaf`, written without recursion. */
export class Deep {
  constructor(
    readonly depth: number,
    readonly shape: 'array' | 'object',
    readonly leaf: JsonNode = 1,
  ) {}
}

/** An array of `count` copies of `item`. */
export class Repeat {
  constructor(
    readonly item: JsonNode,
    readonly count: number,
  ) {}
}

/** A string of `unit` repeated until it is `length` UTF-16 units long. */
export class LongString {
  constructor(
    readonly unit: string,
    readonly length: number,
  ) {}
}

/** A value resolved when the case is sent (see RefValues). */
export class Ref {
  constructor(readonly name: RefName) {}
}

/** Values a case can refer to before they exist. */
export type RefName = 'sessionId' | 'webhookUrl' | 'orgId' | 'victimOrgId' | 'victimKeyId' | 'hostileModel';
export type RefValues = Readonly<Record<RefName, string>>;

export type JsonNode =
  | string
  | number
  | boolean
  | null
  | JsonNode[]
  | { [key: string]: JsonNode }
  | RawToken
  | ByteString
  | Entries
  | Deep
  | Repeat
  | LongString
  | Ref;

/** True for a plain JSON object (not one of the special nodes). */
export function isPlainObject(node: JsonNode): node is { [key: string]: JsonNode } {
  return (
    typeof node === 'object' &&
    node !== null &&
    !Array.isArray(node) &&
    Object.getPrototypeOf(node) === Object.prototype
  );
}

/** Serializes `node` to bytes, resolving refs from `refs`. */
export function toJsonBytes(node: JsonNode, refs: RefValues): Buffer {
  const out: Buffer[] = [];
  write(node, refs, out);
  return Buffer.concat(out);
}

function write(node: JsonNode, refs: RefValues, out: Buffer[]): void {
  if (node === null || typeof node !== 'object') {
    // JSON.stringify writes NaN and -0 as `null` and `0`: numbers that matter arrive as RawToken.
    out.push(Buffer.from(JSON.stringify(node), 'utf8'));
  } else if (Array.isArray(node)) {
    out.push(Buffer.from('['));
    node.forEach((item, i) => {
      if (i > 0) out.push(Buffer.from(','));
      write(item, refs, out);
    });
    out.push(Buffer.from(']'));
  } else if (node instanceof RawToken) {
    out.push(Buffer.from(node.text, 'utf8'));
  } else if (node instanceof ByteString) {
    const quoted = (s: string) => JSON.stringify(s).slice(1, -1);
    out.push(
      Buffer.from(`"${quoted(node.before)}`, 'utf8'),
      Buffer.from(node.bytes),
      Buffer.from(`${quoted(node.after)}"`),
    );
  } else if (node instanceof Entries) {
    writeEntries(node.entries, refs, out);
  } else if (node instanceof Deep) {
    const open = node.shape === 'array' ? '[' : '{"a":';
    const close = node.shape === 'array' ? ']' : '}';
    out.push(Buffer.from(open.repeat(node.depth)));
    write(node.leaf, refs, out);
    out.push(Buffer.from(close.repeat(node.depth)));
  } else if (node instanceof Repeat) {
    // latin1 keeps every byte as it is, invalid UTF-8 included.
    const one = toJsonBytes(node.item, refs).toString('latin1');
    out.push(Buffer.from(`[${new Array<string>(node.count).fill(one).join(',')}]`, 'latin1'));
  } else if (node instanceof LongString) {
    const unit = node.unit || 'a';
    out.push(
      Buffer.from(JSON.stringify(unit.repeat(Math.ceil(node.length / unit.length)).slice(0, node.length)), 'utf8'),
    );
  } else if (node instanceof Ref) {
    out.push(Buffer.from(JSON.stringify(refs[node.name]), 'utf8'));
  } else {
    writeEntries(Object.entries(node), refs, out);
  }
}

function writeEntries(entries: ReadonlyArray<readonly [string, JsonNode]>, refs: RefValues, out: Buffer[]): void {
  out.push(Buffer.from('{'));
  entries.forEach(([key, value], i) => {
    out.push(Buffer.from(`${i > 0 ? ',' : ''}${JSON.stringify(key)}:`, 'utf8'));
    write(value, refs, out);
  });
  out.push(Buffer.from('}'));
}
