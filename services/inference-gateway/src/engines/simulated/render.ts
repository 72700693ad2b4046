import { randomBytes } from 'node:crypto';
import type { ChatCompletionChunk, ChatCompletionResponse, ChunkChoice, Usage } from '@tollway/contracts';
import type { ChoicePlan, CompletionPlan } from './plan';

/**
 * Pure rendering of a plan into vLLM's response and chunk shapes. A stream is a list of steps:
 * step 0 opens every choice with its role, step k carries the k-th token of each choice still
 * generating (its last token carries `finish_reason`, as vLLM does), and, when usage is asked
 * for, a last step holds the usage chunk with empty `choices`.
 */

const ID_PREFIX = `chatcmpl-${randomBytes(6).toString('hex')}`;
let idCounter = 0;

/** A fresh completion id, cheap enough for the hot path. */
export function completionId(): string {
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${ID_PREFIX}${idCounter.toString(36)}`;
}

/** Usage of a whole plan. */
export function planUsage(plan: CompletionPlan): Usage {
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: plan.completionTokens,
    total_tokens: plan.promptTokens + plan.completionTokens,
    ...(plan.reasoningTokens > 0 ? { completion_tokens_details: { reasoning_tokens: plan.reasoningTokens } } : {}),
  };
}

/** The non-streamed response. */
export function renderCompletion(plan: CompletionPlan, id: string, created: number): ChatCompletionResponse {
  return {
    id,
    object: 'chat.completion',
    created,
    model: plan.model,
    choices: plan.choices.map((choice) => ({
      index: choice.index,
      message: {
        role: 'assistant',
        content: choice.toolCall ? null : choice.contentPieces.join(''),
        ...(choice.reasoningPieces.length > 0 ? { reasoning_content: choice.reasoningPieces.join('') } : {}),
        tool_calls: choice.toolCall
          ? [
              {
                id: choice.toolCall.id,
                type: 'function',
                function: { name: choice.toolCall.name, arguments: choice.toolCall.argumentPieces.join('') },
              },
            ]
          : [],
      },
      logprobs: choice.logprobs ? { content: choice.logprobs } : null,
      finish_reason: choice.finishReason,
    })),
    usage: planUsage(plan),
  };
}

/** How many token steps a plan's stream has (the longest choice). */
export function tokenSteps(plan: CompletionPlan): number {
  let steps = 0;
  for (const choice of plan.choices) steps = Math.max(steps, Math.max(1, choice.completionTokens));
  return steps;
}

/** Options of the rendered stream, from the request's `stream_options`. */
export interface StreamRenderOptions {
  includeUsage: boolean;
  continuousUsage: boolean;
}

/**
 * Renders step `step` of a stream: 0 = role chunks, 1…tokenSteps = tokens, tokenSteps+1 = the
 * usage chunk (empty when usage was not asked for).
 */
export function renderStep(
  plan: CompletionPlan,
  step: number,
  id: string,
  created: number,
  options: StreamRenderOptions,
): ChatCompletionChunk[] {
  const last = tokenSteps(plan);
  const chunks: ChatCompletionChunk[] = [];
  if (step === 0) {
    for (const choice of plan.choices) {
      const chunk = chunkOf(plan, id, created, [
        { index: choice.index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null },
      ]);
      if (options.continuousUsage) chunk.usage = usageAt(plan, 0);
      chunks.push(chunk);
    }
    return chunks;
  }
  if (step <= last) {
    for (const choice of plan.choices) {
      const chunkChoice = choiceAt(choice, step - 1);
      if (!chunkChoice) continue;
      const chunk = chunkOf(plan, id, created, [chunkChoice]);
      if (options.continuousUsage) chunk.usage = usageAt(plan, step);
      chunks.push(chunk);
    }
    return chunks;
  }
  if (options.includeUsage) chunks.push({ ...chunkOf(plan, id, created, []), usage: planUsage(plan) });
  return chunks;
}

function chunkOf(plan: CompletionPlan, id: string, created: number, choices: ChunkChoice[]): ChatCompletionChunk {
  return { id, object: 'chat.completion.chunk', created, model: plan.model, choices };
}

/** The chunk choice of token `t` (0-based) of a choice, or null once the choice has finished. */
function choiceAt(choice: ChoicePlan, t: number): ChunkChoice | null {
  const total = Math.max(1, choice.completionTokens);
  if (t >= total) return null;
  const finish = t === total - 1 ? choice.finishReason : null;
  const reasoning = choice.reasoningPieces.length;
  if (t < reasoning) {
    return {
      index: choice.index,
      delta: { reasoning_content: choice.reasoningPieces[t] as string },
      logprobs: null,
      finish_reason: finish,
    };
  }
  const k = t - reasoning;
  if (choice.toolCall) {
    const call = choice.toolCall;
    const piece = call.argumentPieces[k] ?? '';
    const toolDelta =
      k === 0
        ? { index: 0, id: call.id, type: 'function', function: { name: call.name, arguments: piece } }
        : { index: 0, function: { arguments: piece } };
    return { index: choice.index, delta: { tool_calls: [toolDelta] }, logprobs: null, finish_reason: finish };
  }
  const logprob = choice.logprobs?.[k];
  return {
    index: choice.index,
    delta: { content: choice.contentPieces[k] ?? '' },
    logprobs: logprob ? { content: [logprob] } : null,
    finish_reason: finish,
  };
}

/** Cumulative usage after `step` token steps (vLLM's continuous_usage_stats). */
function usageAt(plan: CompletionPlan, step: number): Usage {
  let completion = 0;
  for (const choice of plan.choices) completion += Math.min(step, choice.completionTokens);
  return {
    prompt_tokens: plan.promptTokens,
    completion_tokens: completion,
    total_tokens: plan.promptTokens + completion,
  };
}

/** Usage of the first `step` token steps, for a generation cut short by an abort. */
export function partialUsage(plan: CompletionPlan, step: number): { prompt_tokens: number; completion_tokens: number } {
  const usage = usageAt(plan, Math.max(0, step));
  return { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens };
}
