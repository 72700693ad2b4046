import type { ChatCompletionChunk, ChunkChoice, Usage } from '@tollway/contracts';
import type { SettledUsage } from '../admission/admission.types';
import { RAW_JSON, type EngineChunk, type StreamItem } from '../engines/engine.types';
import { countTextTokensUpTo } from '../tokenizer/count-tokens';
import { normaliseFinishReasons } from './finish-reason';
import { renameChoicesReasoning } from './reasoning-field';
import { UNBOUNDED, usableUsage, type UsageBounds } from '../completions/usage-bounds';

/**
 * Turns whatever chunks an engine sends into the spec's six Events rules:
 * the first chunk is the role delta without usage; the chunk carrying `finish_reason` has no
 * usage; every other chunk carries usage (the engine's own, or a running count); the last JSON
 * chunk has empty `choices` and the totals. Usage is sent whether or not the client asked for it
 * (the spec lists these chunks unconditionally). Engine usage chunks with empty `choices` are
 * held back and only the last one is sent, at the end. Pure apart from its own state.
 */
export class ChunkNormaliser {
  private started = false;
  private template: Pick<ChatCompletionChunk, 'id' | 'created' | 'model'> | null = null;
  /** The latest cumulative usage the engine reported, on any chunk (see `latestUsage`). */
  private engineUsage: Usage | null = null;
  /** A passed-through chunk newer than `engineUsage`, whose usage is read only when needed. */
  private usageText: string | null = null;
  /** The engine's final usage chunk, if it sent one. */
  private finalUsage: Usage | null = null;
  /** Pieces relayed, a cheap running count for engines without per-chunk usage. */
  private pieces = 0;
  /** Text relayed, counted with the tokenizer only when the engine never reports usage. */
  private readonly text: string[] = [];
  /** Indexes of the choices whose `finish_reason` was sent; null until the first. */
  private finished: Set<number> | null = null;

  constructor(
    private readonly modelId: string,
    private readonly promptTokens: number,
    /** The most a usage may claim (see completions/usage-bounds.ts); a claim above it is not used. */
    private readonly bounds: UsageBounds = UNBOUNDED,
  ) {}

  /** The items to send for one engine item (none, one, or a role chunk and the chunk). */
  accept(item: StreamItem, out: StreamItem[]): void {
    if (typeof item === 'string') {
      // A passthrough chunk (streaming/passthrough.ts): sent as it is once the stream has opened,
      // and until a choice has finished (what an engine sends for it after that is dropped).
      if (this.started && this.finished === null) {
        this.usageText = item;
        this.pieces++;
        out.push(item);
        return;
      }
      item = JSON.parse(item) as EngineChunk;
    }
    this.acceptChunk(item, out);
  }

  private acceptChunk(chunk: EngineChunk, out: StreamItem[]): void {
    const usable = usableUsage(chunk.usage, this.bounds);
    if (usable) {
      this.engineUsage = usable;
      this.usageText = null;
    }
    this.template ??= { id: chunk.id, created: chunk.created, model: this.modelId };
    if (chunk.choices.length === 0) {
      if (usable) this.finalUsage = usable;
      return;
    }
    if (renameChoicesReasoning(chunk.choices)) delete chunk[RAW_JSON];
    if (!this.started) {
      this.started = true;
      if (isBareRoleChunk(chunk.choices)) {
        if ('usage' in chunk) dropUsage(chunk);
        out.push(chunk);
        return;
      }
      out.push(this.roleChunk(chunk.choices.map((choice) => choice.index)));
      for (const choice of chunk.choices) if (choice.delta) delete choice.delta.role;
      delete chunk[RAW_JSON];
    }
    if (normaliseFinishReasons(chunk.choices)) delete chunk[RAW_JSON];
    let finishing = false;
    /** The choices kept, once one is dropped: what an engine sends for a choice after its finish. */
    let kept: ChunkChoice[] | null = null;
    const choices = chunk.choices;
    for (let i = 0; i < choices.length; i++) {
      const choice = choices[i] as ChunkChoice;
      if (this.finished?.has(choice.index)) {
        kept ??= choices.slice(0, i);
        continue;
      }
      if (choice.finish_reason) {
        finishing = true;
        (this.finished ??= new Set()).add(choice.index);
      }
      this.count(choice);
      kept?.push(choice);
    }
    if (kept !== null) {
      // A choice ends with the chunk that carries its finish_reason (in this chunk or before).
      if (kept.length === 0) return;
      chunk.choices = kept;
      delete chunk[RAW_JSON];
    }
    if (finishing) {
      if ('usage' in chunk) dropUsage(chunk);
    } else if (usable === null || usable !== chunk.usage) {
      // None, not counts, or cut to the bounds: the client sees the usage that is billed.
      chunk.usage = usable ?? this.runningUsage();
      delete chunk[RAW_JSON];
    }
    out.push(chunk);
  }

  /** The closing chunks: a role chunk if nothing was sent yet, then the totals with empty `choices`. */
  finish(out: StreamItem[]): void {
    if (!this.started) {
      this.started = true;
      out.push(this.roleChunk([0]));
    }
    out.push({ ...this.base(), choices: [], usage: this.totals() });
  }

  /** What the request consumed: the engine's final or latest usage, else a count of what was relayed. */
  settledUsage(): SettledUsage {
    const usage = this.finalUsage ?? this.latestUsage();
    if (usage) return { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens };
    // The text is kept only while no usage came; a usage that came but could not be used (see
    // latestUsage) leaves the pieces relayed, at least a token each.
    const limit = this.bounds.maxCompletionTokens;
    const counted = Math.max(countTextTokensUpTo(this.text.join(''), limit), this.pieces);
    return { prompt_tokens: this.promptTokens, completion_tokens: Math.min(counted, limit) };
  }

  private totals(): Usage {
    if (this.finalUsage) return this.finalUsage;
    const { prompt_tokens, completion_tokens } = this.settledUsage();
    return { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
  }

  /** The engine's latest usage, reading a passed-through chunk's usage if that is the newest. */
  private latestUsage(): Usage | null {
    if (this.usageText !== null) {
      const usage = (JSON.parse(this.usageText) as { usage?: unknown }).usage;
      this.usageText = null;
      const usable = usableUsage(usage, this.bounds);
      if (usable) this.engineUsage = usable;
    }
    return this.engineUsage;
  }

  private runningUsage(): Usage {
    const latest = this.latestUsage();
    const prompt = latest?.prompt_tokens ?? this.promptTokens;
    const completion = Math.max(latest?.completion_tokens ?? 0, this.pieces);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  }

  private count(choice: ChunkChoice): void {
    const delta = choice.delta;
    if (!delta) return;
    const keepText = this.engineUsage === null && this.usageText === null;
    if (delta.content) {
      this.pieces++;
      if (keepText) this.text.push(delta.content);
    }
    if (delta.reasoning_content) {
      this.pieces++;
      if (keepText) this.text.push(delta.reasoning_content);
    }
    if (delta.tool_calls) {
      this.pieces++;
      if (keepText) this.text.push(toolCallText(delta.tool_calls));
    }
  }

  private roleChunk(indexes: number[]): ChatCompletionChunk {
    return {
      ...this.base(),
      choices: indexes.map((index) => ({
        index,
        delta: { role: 'assistant', content: '' },
        logprobs: null,
        finish_reason: null,
      })),
    };
  }

  private base(): Pick<ChatCompletionChunk, 'id' | 'object' | 'created' | 'model'> {
    const template = this.template ?? {
      id: 'chatcmpl-gateway',
      created: Math.floor(Date.now() / 1000),
      model: this.modelId,
    };
    return { id: template.id, object: 'chat.completion.chunk', created: template.created, model: template.model };
  }
}

/**
 * What the model wrote in a tool-call delta: its function's name and a piece of its arguments. The
 * delta's JSON around them (`{"index":0,"function":{"arguments":"a"}}`, about 12 tokens for a
 * one-token piece) is the wire's, not output: counted whole, a stream of 8 such pieces left by its
 * client was billed 100 output tokens (its max_tokens) where the engine had made about 8.
 */
function toolCallText(toolCalls: readonly unknown[]): string {
  let text = '';
  for (const call of toolCalls) {
    const fn = typeof call === 'object' && call !== null ? (call as { function?: unknown }).function : undefined;
    if (typeof fn !== 'object' || fn === null) continue;
    const { name, arguments: args } = fn as { name?: unknown; arguments?: unknown };
    if (typeof name === 'string') text += name;
    if (typeof args === 'string') text += args;
  }
  return text;
}

function dropUsage(chunk: EngineChunk): void {
  delete chunk.usage;
  delete chunk[RAW_JSON];
}

/** A first chunk that only opens the choices: a role, empty or no content, no finish. */
function isBareRoleChunk(choices: readonly ChunkChoice[]): boolean {
  for (const choice of choices) {
    const delta = choice.delta;
    if (!delta?.role || choice.finish_reason) return false;
    if (delta.content || delta.reasoning_content || (delta.tool_calls && delta.tool_calls.length > 0)) return false;
  }
  return true;
}
