import type { Agent } from './agent.types';

/** An agent that answers at once with the text it was sent, without a model call (tests and benchmarks). */
const echoAgent: Agent = async (input) => ({
  messages: [{ role: 'assistant', content: input.message.content }],
  usage: { total_tokens: 0 },
});

export default echoAgent;
