import { z } from 'zod';
import { MessageRequest } from '../sessions/message.schema.js';

/** BullMQ queue that carries agent turns from the session API to the workers. */
export const AGENT_TURN_QUEUE = 'agent-turns';

/**
 * Payload of one agent-turn job. `turn_id` is also the BullMQ job id, so a turn is enqueued
 * at most once, and it is the compare-and-set token that a finishing turn must still hold.
 */
export const AgentTurnJob = z.object({
  session_id: z.uuid(),
  turn_id: z.string().min(1),
  /** Organization that owns the session; null when the API runs without auth. */
  org_id: z.string().nullable(),
  message: MessageRequest,
  /** Unix milliseconds when the API accepted the message. */
  accepted_at: z.number().int(),
  /** W3C `traceparent` of the API request that queued the turn (present only when tracing is on). */
  traceparent: z.string().max(256).optional(),
});
export type AgentTurnJob = z.infer<typeof AgentTurnJob>;
