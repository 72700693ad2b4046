import type { Agent } from './agent.types';

/**
 * An agent that answers at once with the text it was sent, without a model call (tests and
 * benchmarks); its readers get the answer as one delta.
 */
const echoAgent: Agent = async (input, ctx) => {
  if (input.message.content) ctx.events.delta({ content: input.message.content });
  return { messages: [{ role: 'assistant', content: input.message.content }], usage: { total_tokens: 0 } };
};

export default echoAgent;
