export * from './inference/model.schema.js';
export * from './inference/chat-completion.schema.js';
export * from './inference/errors.schema.js';
export * from './inference/rate-limit-headers.js';
export * from './sessions/session.schema.js';
export * from './sessions/message.schema.js';
export * from './sessions/webhook.schema.js';
export * from './jobs/agent-turn.job.js';
