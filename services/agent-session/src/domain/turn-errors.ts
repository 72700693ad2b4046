/**
 * Error text of a turn ended because its session was deleted while it ran: its webhook's `error`
 * (sent with status `error`) and its `turn.cancelled` event's.
 */
export const TURN_CANCELLED_ERROR = 'turn cancelled: session deleted';
