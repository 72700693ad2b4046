import { MODEL_ID_PATTERN } from '@tollway/contracts';

/** The shared model label past the worker's MAX_CHAT_MODELS, and of ids that are no model id. */
export const OTHER_MODEL = '_OTHER';

/** The longest model id that is a label or span name of its own (the gateway's bound on `model`). */
export const MAX_MODEL_LABEL_LENGTH = 256;

/**
 * The model's label in metrics and span names: the id itself when it is one (`<author>/<slug>`,
 * at most MAX_MODEL_LABEL_LENGTH characters), else OTHER_MODEL. Agents may take the model from
 * `user_params`, which any caller writes (up to 64 KiB): a label is repeated on every line of a
 * series, so an unbounded one would make `/metrics` as large as callers like.
 */
export function modelLabelOf(model: string): string {
  return model.length <= MAX_MODEL_LABEL_LENGTH && MODEL_ID_PATTERN.test(model) ? model : OTHER_MODEL;
}
