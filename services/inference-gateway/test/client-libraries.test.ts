import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { APICallError, generateText, streamText, tool } from 'ai';
import { z } from 'zod';
import { insufficientQuota, rateLimitExceeded } from '../src/admission/admission-errors';
import type { Admission, AdmissionRequest, AdmissionTicket } from '../src/admission/admission.types';
import type { SimServer } from '../src/engines/simulated/sim-server';
import {
  catalogModels,
  httpModel,
  RecordingAdmission,
  startGateway,
  startSim,
  TEST_KEY,
  type GatewayHarness,
} from './helpers/gateway-harness';

/**
 * Admits as the recording admission does, but refuses two models the way the real admission does
 * (the same error factories): `tollway/limited` with a 429 budget refusal, `tollway/broke` with 402.
 */
class RefusingAdmission implements Admission {
  readonly recorded = new RecordingAdmission();

  admit(request: AdmissionRequest): Promise<AdmissionTicket> {
    if (request.modelId === 'tollway/limited') throw rateLimitExceeded('requests', 10, 1, 1500, false);
    if (request.modelId === 'tollway/broke') throw insufficientQuota();
    return this.recorded.admit(request);
  }
}

// The clients platform teams point at the gateway besides the openai SDK (openai-sdk.test.ts): the
// Vercel AI SDK through its OpenAI-compatible provider, and LangChain's ChatOpenAI. Each must read
// answers, streams, usage, tool calls and refusals as it reads them from OpenAI.
describe('client libraries against the gateway', () => {
  let sim: SimServer;
  let gateway: GatewayHarness;
  let baseURL: string;
  const admission = new RefusingAdmission();

  beforeAll(async () => {
    const plain = await startSim({ ignore_eos: true });
    sim = plain.sim;
    gateway = await startGateway(
      catalogModels([
        httpModel('tollway/sim-chat', [plain.baseUrl]),
        httpModel('tollway/limited', [plain.baseUrl]),
        httpModel('tollway/broke', [plain.baseUrl]),
      ]),
      { admission },
    );
    baseURL = `${gateway.baseUrl}/v1`;
  });

  afterAll(async () => {
    await gateway.close();
    await sim.close();
  });

  describe('Vercel AI SDK (@ai-sdk/openai-compatible)', () => {
    const provider = () => createOpenAICompatible({ name: 'tollway', baseURL, apiKey: TEST_KEY, includeUsage: true });

    it('generateText: the text, the finish reason and the usage the gateway reported', async () => {
      const result = await generateText({
        model: provider()('tollway/sim-chat'),
        prompt: 'Say hello.',
        maxOutputTokens: 6,
        maxRetries: 0,
      });
      expect(result.text.length).toBeGreaterThan(0);
      expect(result.finishReason).toBe('length');
      expect(result.usage.outputTokens).toBe(6);
      expect(result.usage.inputTokens).toBeGreaterThan(0);
      expect(result.usage.totalTokens).toBe((result.usage.inputTokens ?? 0) + 6);
    });

    it('streamText: every delta, then the finish reason and the usage of the totals chunk', async () => {
      const result = streamText({
        model: provider()('tollway/sim-chat'),
        prompt: 'Count to five.',
        maxOutputTokens: 8,
        maxRetries: 0,
      });
      const parts: string[] = [];
      for await (const text of result.textStream) parts.push(text);
      expect(parts.length).toBeGreaterThan(1);
      expect(parts.join('')).toBe(await result.text);
      expect(await result.finishReason).toBe('length');
      const usage = await result.usage;
      expect(usage.outputTokens).toBe(8);
      expect(usage.totalTokens).toBe((usage.inputTokens ?? 0) + 8);
    });

    it('a tool call comes back as a typed call with parsed arguments, streamed or not', async () => {
      const tools = {
        weather: tool({
          description: 'The weather in a city.',
          inputSchema: z.object({ city: z.string() }),
        }),
      };
      const request = {
        model: provider()('tollway/sim-chat'),
        prompt: 'What is the weather in Paris? Use the weather tool.',
        tools,
        toolChoice: 'required' as const,
        maxRetries: 0,
      };
      const result = await generateText(request);
      expect(result.finishReason).toBe('tool-calls');
      expect(result.toolCalls).toHaveLength(1);
      expect(result.toolCalls[0]).toMatchObject({ toolName: 'weather', input: { city: expect.any(String) } });
      const streamed = streamText(request);
      const calls = await streamed.toolCalls;
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({ toolName: 'weather', input: { city: expect.any(String) } });
    });

    it('a 429 is a retryable APICallError carrying the retry headers; a 402 and a 404 are not retryable', async () => {
      const call = (model: string) =>
        generateText({ model: provider()(model), prompt: 'hi', maxRetries: 0 }).catch((err: unknown) => err);
      const limited = await call('tollway/limited');
      expect(APICallError.isInstance(limited)).toBe(true);
      const rateLimited = limited as APICallError;
      expect(rateLimited.statusCode).toBe(429);
      expect(rateLimited.isRetryable).toBe(true);
      expect(rateLimited.responseHeaders?.['retry-after-ms']).toBe('1500');
      expect(rateLimited.message).toMatch(/Rate limit reached for requests/);
      for (const [model, status] of [
        ['tollway/broke', 402],
        ['nobody/nothing', 404],
      ] as const) {
        const err = (await call(model)) as APICallError;
        expect(APICallError.isInstance(err)).toBe(true);
        expect([err.statusCode, err.isRetryable]).toEqual([status, false]);
      }
    });
  });

  describe("LangChain (@langchain/openai's ChatOpenAI)", () => {
    const chat = (model = 'tollway/sim-chat') =>
      new ChatOpenAI({ model, apiKey: TEST_KEY, configuration: { baseURL }, maxRetries: 0, maxTokens: 6 });

    it('invoke: the message and its usage metadata', async () => {
      const message = await chat().invoke('Say hello.');
      expect(typeof message.content).toBe('string');
      expect((message.content as string).length).toBeGreaterThan(0);
      expect(message.usage_metadata).toMatchObject({ output_tokens: 6 });
      expect(message.usage_metadata?.total_tokens).toBe((message.usage_metadata?.input_tokens ?? 0) + 6);
      expect(message.response_metadata).toMatchObject({ finish_reason: 'length', model_name: 'tollway/sim-chat' });
    });

    it('stream: the chunks add up to the message, the last carrying the usage of the totals chunk', async () => {
      const chunks = [];
      for await (const chunk of await chat().stream('Count to five.')) chunks.push(chunk);
      expect(chunks.length).toBeGreaterThan(1);
      const whole = chunks.reduce((sum, chunk) => sum.concat(chunk));
      expect((whole.content as string).length).toBeGreaterThan(0);
      expect(whole.usage_metadata).toMatchObject({ output_tokens: 6 });
      expect(whole.usage_metadata?.total_tokens).toBe((whole.usage_metadata?.input_tokens ?? 0) + 6);
    });

    it('bindTools: the tool call with parsed arguments', async () => {
      const model = chat().bindTools(
        [
          {
            type: 'function',
            function: {
              name: 'weather',
              description: 'The weather in a city.',
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
          },
        ],
        { tool_choice: 'required' },
      );
      const message = await model.invoke('What is the weather in Paris?');
      expect(message.tool_calls).toHaveLength(1);
      expect(message.tool_calls?.[0]).toMatchObject({ name: 'weather', args: { city: expect.any(String) } });
    });

    it('a refusal is an error with its status and the envelope message', async () => {
      const limited = (await chat('tollway/limited')
        .invoke('hi')
        .catch((err: unknown) => err)) as Error & { status?: number; lc_error_code?: string };
      expect(limited.status).toBe(429);
      expect(limited.lc_error_code).toBe('MODEL_RATE_LIMIT');
      expect(limited.message).toMatch(/Rate limit reached for requests/);
      const broke = (await chat('tollway/broke')
        .invoke('hi')
        .catch((err: unknown) => err)) as Error & { status?: number };
      expect(broke.status).toBe(402);
    });
  });
});
