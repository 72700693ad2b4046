/**
 * Prompts cut into fixed-size character blocks, each hashed in a chain with the blocks before it,
 * so equal hashes at position i mean equal prompts up to the end of block i (barring collisions).
 * vLLM hashes 16-token blocks the same way for its prefix cache; the simulated engine stands a
 * token for four characters, and the gateway's prefix-cache routing (like llm-d's approximate
 * scorer) uses larger blocks of characters. Only whole blocks are hashed: a prompt's tail that
 * does not fill a block is never shared.
 */

/** A message as far as the prompt text cares. */
interface PromptMessage {
  role: string;
  content?: string | readonly unknown[] | null;
}

/**
 * Calls `visit` with the prompt's text in order (each message's role and text content, as a chat
 * template renders them), up to `maxChars` characters in all; no string of the whole prompt is
 * built. Image and audio parts are skipped.
 */
function visitPromptText(messages: readonly PromptMessage[], maxChars: number, visit: (text: string) => void): void {
  let left = maxChars;
  const take = (text: string) => {
    if (left <= 0 || text.length === 0) return;
    const part = text.length <= left ? text : text.slice(0, left);
    left -= part.length;
    visit(part);
  };
  for (const message of messages) {
    if (left <= 0) return;
    take(`<${message.role}>`);
    const content = message.content;
    if (typeof content === 'string') take(content);
    else if (Array.isArray(content)) {
      for (const part of content as readonly unknown[]) {
        const text = (part as { text?: unknown } | null)?.text;
        if (typeof text === 'string') take(text);
      }
    }
  }
}

/** Characters of the prompt's text (as `promptBlockHashes` reads it). */
export function promptTextLength(messages: readonly PromptMessage[]): number {
  let length = 0;
  visitPromptText(messages, Number.POSITIVE_INFINITY, (text) => {
    length += text.length;
  });
  return length;
}

/**
 * The chain hashes of the prompt's first whole blocks of `blockChars` characters, at most
 * `maxBlocks` of them (so hashing costs at most blockChars × maxBlocks characters however long the
 * prompt). Each hash is a 53-bit number (cyrb53 over the block, seeded with the previous block's hash).
 */
export function promptBlockHashes(messages: readonly PromptMessage[], blockChars: number, maxBlocks: number): number[] {
  // One flat string, then a loop with the hash state in locals, two characters a step: the
  // per-request routing cost is this loop (a few tens of µs for a 20 000-character prompt).
  const parts: string[] = [];
  visitPromptText(messages, blockChars * maxBlocks, (text) => parts.push(text));
  const text = parts.join('');
  const blocks = Math.floor(text.length / blockChars);
  const hashes = new Array<number>(blocks);
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let block = 0; block < blocks; block++) {
    const end = (block + 1) * blockChars;
    let i = block * blockChars;
    for (; i + 1 < end; i += 2) {
      const pair = text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16);
      h1 = Math.imul(h1 ^ pair, 2654435761);
      h2 = Math.imul(h2 ^ pair, 1597334677);
    }
    if (i < end) {
      h1 = Math.imul(h1 ^ text.charCodeAt(i), 2654435761);
      h2 = Math.imul(h2 ^ text.charCodeAt(i), 1597334677);
    }
    const hash = finish(h1, h2);
    hashes[block] = hash;
    // The block's hash seeds the next block's: a chain.
    h1 = 0xdeadbeef ^ (hash >>> 0);
    h2 = 0x41c6ce57 ^ Math.floor(hash / 4294967296);
  }
  return hashes;
}

/** A 53-bit hash of `text` (cyrb53), for keys that are not prompts (a sticky routing key). */
export function hashText(text: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  return finish(h1, h2);
}

/** cyrb53's final mix of its two 32-bit lanes into a 53-bit number. */
function finish(h1: number, h2: number): number {
  const a = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  const b = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(a ^ (a >>> 13), 3266489909);
  return 4294967296 * (2097151 & b) + (a >>> 0);
}
