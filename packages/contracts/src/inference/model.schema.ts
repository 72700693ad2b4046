import { z } from 'zod';

/** A model id is `<author>/<slug>`: two non-empty parts without slashes or blanks. */
export const MODEL_ID_PATTERN = /^[^/\s]+\/[^/\s]+$/;

export const ModelId = z.string().regex(MODEL_ID_PATTERN, 'model id must be of the form <author>/<slug>');
export type ModelId = z.infer<typeof ModelId>;

export const Model = z.object({
  id: ModelId,
  object: z.literal('model'),
  /** Unix timestamp, seconds. */
  created: z.number().int(),
  owned_by: z.string(),
});
export type Model = z.infer<typeof Model>;

export const ModelList = z.object({
  object: z.literal('list'),
  data: z.array(Model),
});
export type ModelList = z.infer<typeof ModelList>;
