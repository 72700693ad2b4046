// Prompt text for the routing benches: words from a fixed list, seeded, so the same seed gives the
// same text (a shared system prompt) and different seeds share nothing past their first words.

/** Characters per token, as the simulated engine counts them. */
export const CHARS_PER_TOKEN = 4;

const WORDS =
  'time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word business issue side kind head house service friend father power hour game line end member law car city community name president team minute idea kid body information back parent face others level office door health person art war history party result change morning reason research girl guy moment air teacher force education'.split(
    ' ',
  );

/** About `tokens` tokens of text, the same for the same seed. */
export function promptText(seed, tokens) {
  let state = 2166136261;
  for (const ch of String(seed)) state = Math.imul(state ^ ch.charCodeAt(0), 16777619);
  const parts = [];
  let length = 0;
  while (length < tokens * CHARS_PER_TOKEN) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    const word = WORDS[(state >>> 0) % WORDS.length];
    parts.push(word);
    length += word.length + 1;
  }
  return parts.join(' ').slice(0, tokens * CHARS_PER_TOKEN);
}
