import { z } from 'zod';
import { MessageRequest } from '../sessions/message.schema.js';

/**
 * Payload of one agent turn, as the session API queues it for the workers (kept with the session
 * while the turn runs). `turn_id` is the compare-and-set token that a finishing turn must still hold.
 */
export const AgentTurnJob = z.object({
  session_id: z.uuid(),
  turn_id: z.string().min(1),
  /** Organization that owns the session; null when the API runs without auth. */
  org_id: z.string().nullable(),
  /**
   * The message's `role`, `user_params` and `webhook`; its content (and tool fields, image) is in
   * the session's history, which the turn runs on, so a job never repeats it.
   */
  message: MessageRequest,
  /** Unix milliseconds when the API accepted the message. */
  accepted_at: z.number().int(),
  /** W3C `traceparent` of the API request that queued the turn (present only when tracing is on). */
  traceparent: z.string().max(256).optional(),
});
export type AgentTurnJob = z.infer<typeof AgentTurnJob>;
