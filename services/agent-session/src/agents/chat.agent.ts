import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { Agent } from './agent.types';
import { fromResponseMessage, parseChatUserParams, samplingFields, toRequestMessage } from './chat-messages';
import { callModel } from './model-call';

/**
 * The default agent: one chat completion through the gateway with the history plus the new message.
 * `user_params` may choose `model` and the sampling parameters (and pass `tools`: tool calls the model
 * makes are appended for the client to answer with `tool` messages). Appends the assistant reply.
 */
const chatAgent: Agent = async (input, ctx) => {
  const params = parseChatUserParams(input.userParams);
  const body = {
    ...samplingFields(params),
    model: params.model ?? ctx.settings.defaultModel,
    messages: [...input.history, input.message].map(toRequestMessage),
    stream: false,
  } as ChatCompletionCreateParamsNonStreaming;
  const completion = await callModel(ctx, body);
  const choice = completion.choices[0];
  if (!choice) throw new Error('the model returned no choices');
  return {
    messages: [fromResponseMessage(choice.message)],
    usage: { total_tokens: completion.usage?.total_tokens ?? 0 },
  };
};

export default chatAgent;
