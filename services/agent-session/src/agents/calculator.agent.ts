import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions';
import type { StoredMessage } from '../store/session-store';
import type { Agent } from './agent.types';
import { CALCULATOR_TOOL, runCalculator } from './calculator-tool';
import { fromResponseMessage, parseChatUserParams, samplingFields, toRequestMessage } from './chat-messages';
import { streamModel } from './model-call';

/** Most model calls of one turn, so a model that keeps calling tools cannot loop forever. */
const MAX_ROUNDS = 5;

/**
 * Example agent with a tool (`AGENT_MODULE=…/agents/calculator.agent`): offers the model a
 * `calculator` tool, runs every tool call it makes, and appends the assistant tool-call message,
 * each tool result (`role: tool`) and the final answer to the history. Its model calls are
 * streamed to the session's readers, and each tool result is told them as a `tool.result` event.
 */
const calculatorAgent: Agent = async (input, ctx) => {
  const params = parseChatUserParams(input.userParams);
  const appended: StoredMessage[] = [];
  let totalTokens = 0;
  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const body = {
      ...samplingFields(params),
      model: params.model ?? ctx.settings.defaultModel,
      messages: [...input.history, input.message, ...appended].map(toRequestMessage),
      tools: [CALCULATOR_TOOL],
    } as ChatCompletionCreateParamsBase;
    const completion = await streamModel(ctx, body);
    totalTokens += completion.usage?.total_tokens ?? 0;
    const choice = completion.choices[0];
    if (!choice) throw new Error('the model returned no choices');
    const reply = fromResponseMessage(choice.message);
    appended.push(reply);
    const toolCalls = choice.message.tool_calls ?? [];
    if (toolCalls.length === 0) return { messages: appended, usage: { total_tokens: totalTokens } };
    for (const call of toolCalls) {
      const result =
        call.type === 'function' && call.function.name === CALCULATOR_TOOL.function.name
          ? runCalculator(call.function.arguments)
          : `error: unknown tool "${call.type === 'function' ? call.function.name : call.type}"`;
      ctx.logger.debug('tool call', { tool: call.type === 'function' ? call.function.name : call.type });
      appended.push({ role: 'tool', content: result, tool_call_id: call.id });
      ctx.events.toolResult({ tool_call_id: call.id, content: result });
    }
  }
  throw new Error(`the model still called tools after ${MAX_ROUNDS} rounds`);
};

export default calculatorAgent;
