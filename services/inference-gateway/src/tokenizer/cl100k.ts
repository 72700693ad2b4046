import { countTokens, decode, encode, setMergeCacheSize } from 'gpt-tokenizer/cjs/encoding/cl100k_base';

/**
 * The cl100k_base encoder every part of the gateway uses, with gpt-tokenizer's merge cache off.
 * That cache keeps the BPE result of up to 100,000 pieces in a Map and, once full, drops its
 * oldest key on every insert; V8 leaves a deleted Map entry as a hole that the next `keys()` walk
 * must step over, so each insert costs more the longer the cache has been full. Measured here
 * (2026-11-25): after 300,000 distinct pieces, adversarial text (digits and punctuation without a
 * space) took up to 9.1 µs a character against 0.6 without the cache, so a 125 KB prompt or an
 * engine answer without usage held the event loop for over a second; and the cache kept 28.5 MB
 * of heap (RSS 170 against 105 MiB). English text costs the same either way (26-45 ns a character
 * warm), since a piece that is a whole token never reaches BPE; repeated texts are remembered
 * whole by PromptTokenCounter instead.
 */
setMergeCacheSize(0);

export { countTokens, decode, encode };
