import OpenAI from 'openai';
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

// The official SDK against the gateway, whose catalog points at the simulated engine over HTTP.
describe('openai SDK against the gateway', () => {
  let sim: SimServer;
  let reasoner: SimServer;
  let gateway: GatewayHarness;
  let client: OpenAI;
  const admission = new RecordingAdmission();

  beforeAll(async () => {
    const plain = await startSim();
    const thinking = await startSim({ reasoning: true });
    sim = plain.sim;
    reasoner = thinking.sim;
    gateway = await startGateway(
      catalogModels([
        httpModel('tollway/sim-chat', [plain.baseUrl]),
        httpModel('tollway/sim-narrow', [plain.baseUrl], { narrowed: true }),
        httpModel('tollway/sim-reasoner', [thinking.baseUrl]),
      ]),
      { admission },
    );
    client = new OpenAI({ apiKey: TEST_KEY, baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });
  });

  afterAll(async () => {
    await gateway.close();
    await sim.close();
    await reasoner.close();
  });

  it('lists the catalog models', async () => {
    const page = await client.models.list();
    expect(page.data.map((model) => model.id)).toEqual([
      'tollway/sim-chat',
      'tollway/sim-narrow',
      'tollway/sim-reasoner',
    ]);
    expect(page.data[0]).toEqual({ id: 'tollway/sim-chat', object: 'model', created: 1767225600, owned_by: 'test' });
  });

  it('retrieves one model, and 404s an unknown one with NotFoundError', async () => {
    await expect(client.models.retrieve('tollway/sim-chat')).resolves.toMatchObject({
      id: 'tollway/sim-chat',
      object: 'model',
    });
    const err = await client.models.retrieve('nobody/nothing').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  });

  it('creates a completion with usage, and settles that usage', async () => {
    const before = admission.tickets.length;
    const completion = await client.chat.completions.create({
      model: 'tollway/sim-chat',
      messages: [{ role: 'user', content: 'Tell me about rivers.' }],
      max_tokens: 7,
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('tollway/sim-chat');
    expect(completion.choices[0]?.finish_reason).toBe('length');
    expect(completion.usage).toMatchObject({ completion_tokens: 7 });
    await admission.allClosed();
    const ticket = admission.tickets[before];
    expect(ticket?.request).toMatchObject({
      modelId: 'tollway/sim-chat',
      reservedOutputTokens: 7,
      principal: { orgId: 'config' },
    });
    expect(ticket?.settled).toEqual([{ prompt_tokens: completion.usage?.prompt_tokens, completion_tokens: 7 }]);
  });

  it('streams with the SDK and ends with the usage totals', async () => {
    const stream = await client.chat.completions.create({
      model: 'tollway/sim-chat',
      messages: [{ role: 'user', content: 'Stream a sentence.' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let last: OpenAI.Chat.Completions.ChatCompletionChunk | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      last = chunk;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('keeps reasoning apart from content on a reasoning model', async () => {
    const completion = await client.chat.completions.create({
      model: 'tollway/sim-reasoner',
      messages: [{ role: 'user', content: 'Think first.' }],
    });
    const message = completion.choices[0]?.message as { content: string | null; reasoning_content?: string };
    expect(message.reasoning_content?.length).toBeGreaterThan(0);
    expect(message.content?.length).toBeGreaterThan(0);
    expect(completion.usage?.completion_tokens_details?.reasoning_tokens).toBeGreaterThan(0);
  });

  it('maps errors to the SDK classes', async () => {
    const unauthenticated = new OpenAI({ apiKey: 'wrong', baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });
    await expect(unauthenticated.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const narrow = await client.chat.completions
      .create({ model: 'tollway/sim-narrow', messages: [{ role: 'user', content: 'hi' }], n: 2 })
      .catch((e: unknown) => e);
    expect(narrow).toBeInstanceOf(OpenAI.BadRequestError);
    // The flat engine shape has no `error` key for the SDK to read; its fields are checked in errors.test.ts.
    expect((narrow as InstanceType<typeof OpenAI.BadRequestError>).status).toBe(400);
    const missing = await client.chat.completions
      .create({ model: 'acme/none', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    const bounds = await client.chat.completions
      .create({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'hi' }], temperature: 3 })
      .catch((e: unknown) => e);
    expect(bounds).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('returns tool calls when a tool is required', async () => {
    const completion = await client.chat.completions.create({
      model: 'tollway/sim-chat',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            parameters: {
              type: 'object',
              properties: { city: { type: 'string' }, days: { type: 'integer' } },
              required: ['city'],
            },
          },
        },
      ],
      tool_choice: 'required',
    });
    const choice = completion.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    const call = choice?.message.tool_calls?.[0] as { function: { name: string; arguments: string } };
    expect(call.function.name).toBe('get_weather');
    expect(Object.keys(JSON.parse(call.function.arguments))).toEqual(['city', 'days']);
  });
});
