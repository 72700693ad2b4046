/** The output tokens a request reserves in the `output_tokens` budget until its usage is known. */
export interface OutputReservation {
  tokens: number;
  /** True when the client set neither max_completion_tokens nor max_tokens. */
  isDefault: boolean;
}

/**
 * (`max_completion_tokens` ?? `max_tokens` ?? `defaultTokens`, config
 * `DEFAULT_OUTPUT_RESERVATION_TOKENS`) × `n`: each of the `n` choices may generate that many. A
 * default reservation is capped at the organization's output budget by admission, and whatever
 * is not used is refunded at settlement.
 */
export function outputReservation(
  body: { max_completion_tokens?: number | null; max_tokens?: number | null; n?: number | null },
  defaultTokens: number,
): OutputReservation {
  const asked = body.max_completion_tokens ?? body.max_tokens;
  const choices = body.n ?? 1;
  return asked == null
    ? { tokens: defaultTokens * choices, isDefault: true }
    : { tokens: asked * choices, isDefault: false };
}
