import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { Agent } from './agent.types';
import { fromResponseMessage, parseChatUserParams, samplingFields, toRequestMessage } from './chat-messages';
import { streamModel } from './model-call';

/**
 * The default agent: one chat completion through the gateway with the history plus the new message.
 * `user_params` may choose `model` and the sampling parameters (and pass `tools`: tool calls the model
 * makes are appended for the client to answer with `tool` messages). Appends the assistant reply.
 * The call is streamed, its deltas forwarded to the session's readers as they come. The call names
 * the session as its `user`, which the gateway's `sticky` and `prefix_cache` routing key on.
 */
const chatAgent: Agent = async (input, ctx) => {
  const params = parseChatUserParams(input.userParams);
  const body = {
    // The session id as `user` lets the gateway keep a session's turns on one engine replica, whose
    // KV cache holds the conversation so far; a `user` in user_params wins.
    user: ctx.sessionId,
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
