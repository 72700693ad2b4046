import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';

/** What one chunk adds to the first choice's message, to forward as it comes. */
export interface ChunkDeltas {
  content?: string;
  reasoning_content?: string;
  toolCalls: Array<{ index: number; id?: string; name?: string; arguments?: string }>;
}

interface ToolCallParts {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Builds a chat completion from the chunks of a stream, as the non-streamed answer would have
 * been: the first choice's content, reasoning and tool calls concatenated from their deltas, its
 * finish reason, and the last usage the stream reported. `add` returns what each chunk adds, so
 * the text forwarded and the text kept are the same deltas.
 */
export class CompletionAssembler {
  private id = '';
  private model = '';
  private created = 0;
  private content: string | null = null;
  private reasoning: string | null = null;
  private readonly toolCalls = new Map<number, ToolCallParts>();
  private finishReason: ChatCompletion.Choice['finish_reason'] | null = null;
  private usage: ChatCompletion['usage'] | undefined;

  add(chunk: ChatCompletionChunk): ChunkDeltas {
    this.id ||= chunk.id ?? '';
    this.model ||= chunk.model ?? '';
    this.created ||= chunk.created ?? 0;
    if (chunk.usage) this.usage = chunk.usage;
    const deltas: ChunkDeltas = { toolCalls: [] };
    const choice = chunk.choices?.find((candidate) => candidate.index === 0);
    if (!choice) return deltas;
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = choice.delta as (typeof choice.delta & { reasoning_content?: string | null }) | undefined;
    if (typeof delta?.content === 'string' && delta.content !== '') {
      this.content = (this.content ?? '') + delta.content;
      deltas.content = delta.content;
    }
    if (typeof delta?.reasoning_content === 'string' && delta.reasoning_content !== '') {
      this.reasoning = (this.reasoning ?? '') + delta.reasoning_content;
      deltas.reasoning_content = delta.reasoning_content;
    }
    for (const call of delta?.tool_calls ?? []) {
      const parts = this.toolCalls.get(call.index) ?? { id: '', name: '', arguments: '' };
      const piece: ChunkDeltas['toolCalls'][number] = { index: call.index };
      if (call.id) parts.id = piece.id = call.id;
      if (call.function?.name) {
        parts.name += call.function.name;
        piece.name = call.function.name;
      }
      if (call.function?.arguments) {
        parts.arguments += call.function.arguments;
        piece.arguments = call.function.arguments;
      }
      this.toolCalls.set(call.index, parts);
      deltas.toolCalls.push(piece);
    }
    return deltas;
  }

  /** The completion the chunks make. */
  completion(): ChatCompletion {
    const toolCalls = [...this.toolCalls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({
        id: call.id,
        type: 'function' as const,
        function: { name: call.name, arguments: call.arguments },
      }));
    const message: ChatCompletion.Choice['message'] & { reasoning_content?: string } = {
      role: 'assistant',
      content: this.content,
      refusal: null,
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      ...(this.reasoning !== null ? { reasoning_content: this.reasoning } : {}),
    };
    return {
      id: this.id,
      object: 'chat.completion',
      created: this.created,
      model: this.model,
      choices: [{ index: 0, message, finish_reason: this.finishReason ?? 'stop', logprobs: null }],
      ...(this.usage ? { usage: this.usage } : {}),
    };
  }
}
