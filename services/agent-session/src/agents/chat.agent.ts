import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { Agent } from './agent.types';
import { fromResponseMessage, parseChatUserParams, samplingFields, toRequestMessage } from './chat-messages';
import { streamModel } from './model-call';

/**
 * The default agent: one chat completion through the gateway with the history plus the new message.
 * `user_params` may choose `model` and the sampling parameters (and pass `tools`: tool calls the model
 * makes are appended for the client to answer with `tool` messages). Appends the assistant reply.
 * The call is streamed, its deltas forwarded to the session's readers as they come.
 */
const chatAgent: Agent = async (input, ctx) => {
  const params = parseChatUserParams(input.userParams);
  const body = {
    ...samplingFields(params),
    model: params.model ?? ctx.settings.defaultModel,
    messages: [...input.history, input.message].map(toRequestMessage),
  } as ChatCompletionCreateParamsBase;
  const completion = await streamModel(ctx, body);
  const choice = completion.choices[0];
  if (!choice) throw new Error('the model returned no choices');
  return {
    messages: [fromResponseMessage(choice.message)],
    usage: { total_tokens: completion.usage?.total_tokens ?? 0 },
  };
};

export default chatAgent;
