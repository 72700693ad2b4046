import { validateOpenApi } from '../__fixtures__/issues';
import { RATE_LIMIT_HEADERS, RETRY_HEADERS } from '../inference/rate-limit-headers';
import { buildInferenceOpenApi, buildSessionsOpenApi, type OpenApiDocument } from './build-documents';
import { SESSION_EVENT_TYPES } from '../sessions/session-event.schema';

/** The component name of an event type's schema: `turn.started` → `TurnStartedEvent`, `agent.event` → `AgentCustomEvent`. */
function eventSchemaName(type: string): string {
  if (type === 'agent.event') return 'AgentCustomEvent';
  return `${type.replace(/(^|[._])(\w)/g, (_m, _s, c: string) => c.toUpperCase())}Event`;
}

/** The Statuses table of inference-api.md. */
const INFERENCE_STATUSES: Array<[string, string, string[]]> = [
  ['get', '/models', ['200', '401']],
  ['get', '/models/{author}/{slug}', ['200', '401', '404']],
  ['post', '/chat/completions', ['200', '400', '401', '402', '404', '429']],
];

/** The Endpoints and Errors tables of agent-sessions.md. */
const SESSIONS_STATUSES: Array<[string, string, string[]]> = [
  ['get', '/health', ['200']],
  ['post', '/sessions', ['201', '503']],
  ['put', '/sessions/{session_id}', ['201', '400', '405', '409', '503']],
  ['get', '/sessions', ['200']],
  ['get', '/sessions/{session_id}', ['200', '404']],
  ['delete', '/sessions/{session_id}', ['204', '404']],
  ['post', '/sessions/{session_id}/messages', ['202', '404', '409']],
  ['get', '/sessions/{session_id}/messages', ['200', '404']],
];

type Json = Record<string, unknown>;

function operation(doc: OpenApiDocument, method: string, path: string): Json {
  const item = doc.paths[path] as Json | undefined;
  expect(item).toBeDefined();
  const op = item?.[method] as Json | undefined;
  expect(op).toBeDefined();
  return op as Json;
}

function responses(doc: OpenApiDocument, method: string, path: string): Record<string, Json> {
  return operation(doc, method, path).responses as Record<string, Json>;
}

/** Every `$ref` string anywhere in the document. */
function collectRefs(node: unknown, refs: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((child) => collectRefs(child, refs));
  else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') refs.push(value);
      else collectRefs(value, refs);
    }
  }
  return refs;
}

function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, part) => (node && typeof node === 'object' ? (node as Json)[part] : undefined), doc);
}

describe.each([
  ['inference', buildInferenceOpenApi, INFERENCE_STATUSES],
  ['sessions', buildSessionsOpenApi, SESSIONS_STATUSES],
] as const)('the %s document', (_name, build, statuses) => {
  const doc = build();

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(await validateOpenApi([doc])).toEqual([null]);
  });

  it('is plain JSON', () => {
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });

  it.each(statuses)('documents %s %s with every status of the spec', (method, path, codes) => {
    expect(Object.keys(responses(doc, method, path))).toEqual(expect.arrayContaining(codes));
  });

  it('resolves every $ref inside the document', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(10);
    for (const ref of refs) expect([ref, resolvePointer(doc, ref) !== undefined]).toEqual([ref, true]);
  });

  it('gives every operation an id, a summary and responses', () => {
    const ids = new Set<string>();
    for (const item of Object.values(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (method === 'servers') continue;
        const { operationId, summary, responses: rs } = op as unknown as Json;
        expect(typeof operationId).toBe('string');
        expect(typeof summary).toBe('string');
        expect(Object.keys(rs as Json).length).toBeGreaterThan(0);
        expect(ids.has(operationId as string)).toBe(false);
        ids.add(operationId as string);
      }
    }
  });

  it('builds a fresh document per call', () => {
    const other = build();
    other.paths = {};
    expect(Object.keys(build().paths).length).toBeGreaterThan(0);
  });
});

describe('buildInferenceOpenApi', () => {
  const doc = buildInferenceOpenApi();

  it('carries version 2026-09-17, the /v1 server and bearer auth on every operation', () => {
    expect(doc.info.version).toBe('2026-09-17');
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/v1' })]);
    expect(doc.components.securitySchemes?.bearerAuth).toEqual(
      expect.objectContaining({ type: 'http', scheme: 'bearer' }),
    );
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
  });

  it('describes the 200 of chat completions as JSON or an SSE stream with the rate-limit headers', () => {
    const ok = responses(doc, 'post', '/chat/completions')['200'] as Json;
    expect(Object.keys(ok.content as Json)).toEqual(['application/json', 'text/event-stream']);
    expect(Object.keys(ok.headers as Json).sort()).toEqual(Object.values(RATE_LIMIT_HEADERS).sort());
    const sse = (ok.content as Record<string, Json>)['text/event-stream'];
    expect(String(sse?.example).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('puts the retry headers on 429 and x-should-retry on 402', () => {
    const rs = responses(doc, 'post', '/chat/completions');
    expect(Object.keys(rs['429']?.headers as Json).sort()).toEqual(Object.values(RETRY_HEADERS).sort());
    expect(Object.keys(rs['402']?.headers as Json)).toEqual([RETRY_HEADERS.shouldRetry]);
  });

  it('allows both engine error styles on 400', () => {
    const bad = responses(doc, 'post', '/chat/completions')['400'] as Json;
    expect(Object.keys(bad.content as Json)).toEqual(['application/json', 'text/plain']);
    expect(JSON.stringify(bad.content)).toContain('#/components/schemas/EngineErrorResponse');
  });

  it('shows the 401 envelope without a code field', () => {
    const unauthorized = responses(doc, 'get', '/models')['401'] as Json;
    const example = (unauthorized.content as Record<string, Json>)['application/json']?.example as { error: Json };
    expect(example.error).not.toHaveProperty('code');
  });

  it('derives the request schema from the Zod contract, wire bounds included', () => {
    const request = doc.components.schemas.CreateChatCompletionRequest as { required: string[]; properties: Json };
    expect(request.required).toEqual(['model', 'messages']);
    expect(JSON.stringify(request.properties.temperature)).toContain('"maximum":2');
    expect(JSON.stringify(request.properties.presence_penalty)).toContain('"minimum":-2');
    expect(request.properties.messages).toEqual(expect.objectContaining({ minItems: 1 }));
    const engineError = doc.components.schemas.EngineErrorResponse as { properties: Record<string, Json> };
    expect(engineError.properties.code?.type).toBe('integer');
  });

  it('merges extra paths and schemas, e.g. an admin API on its own server', async () => {
    const withAdmin = buildInferenceOpenApi({
      extraPaths: {
        '/organizations': {
          servers: [{ url: '/admin/v1' }],
          get: {
            operationId: 'listOrganizations',
            summary: 'List organizations',
            responses: {
              '200': {
                description: 'ok',
                content: { 'application/json': { schema: { $ref: '#/components/schemas/Org' } } },
              },
            },
          },
        },
      },
      extraSchemas: { Org: { type: 'object' } },
    });
    expect(Object.keys(withAdmin.paths)).toContain('/organizations');
    expect(await validateOpenApi([withAdmin])).toEqual([null]);
  });
});

describe('buildSessionsOpenApi', () => {
  const doc = buildSessionsOpenApi();

  it('answers errors with the session error envelope', () => {
    const notFound = responses(doc, 'get', '/sessions/{session_id}')['404'] as Json;
    expect(JSON.stringify(notFound)).toContain('#/components/schemas/SessionErrorResponse');
    expect(doc.components.schemas.SessionErrorResponse).toEqual(expect.objectContaining({ required: ['error'] }));
  });

  it('sends Location on creation and on send, and a long-poll query', () => {
    expect(Object.keys(responses(doc, 'post', '/sessions')['201']?.headers as Json)).toEqual(['Location']);
    expect(Object.keys(responses(doc, 'put', '/sessions/{session_id}')['201']?.headers as Json)).toEqual(['Location']);
    expect(Object.keys(responses(doc, 'post', '/sessions/{session_id}/messages')['202']?.headers as Json)).toEqual([
      'Location',
    ]);
    const params = operation(doc, 'get', '/sessions/{session_id}').parameters as Json[];
    expect(params.map((p) => p.name)).toEqual(['session_id', 'wait', 'timeout']);
  });

  it('documents the turn-complete webhook as a callback carrying WebhookPayload', () => {
    const callbacks = operation(doc, 'post', '/sessions/{session_id}/messages').callbacks as Json;
    expect(JSON.stringify(callbacks)).toContain('#/components/schemas/WebhookPayload');
  });

  it("lists the event stream: GET events with follow and both ways to resume, and the send's stream answer", () => {
    const events = responses(doc, 'get', '/sessions/{session_id}/events');
    expect(Object.keys(events).sort()).toEqual(['200', '400', '401', '404', '429', '503']);
    expect(JSON.stringify(events['200']?.content)).toBe(
      JSON.stringify({ 'text/event-stream': { schema: { $ref: '#/components/schemas/SessionEvent' } } }),
    );
    const params = operation(doc, 'get', '/sessions/{session_id}/events').parameters as Json[];
    expect(params.map((p) => [p.name, p.in])).toEqual([
      ['session_id', 'path'],
      ['follow', 'query'],
      ['last_event_id', 'query'],
      ['Last-Event-ID', 'header'],
    ]);
    const send = responses(doc, 'post', '/sessions/{session_id}/messages');
    expect(Object.keys(send['200']?.content as Json)).toEqual(['text/event-stream']);
    expect(Object.keys(send['202']?.content as Json)).toEqual(['application/json']);
    const union = doc.components.schemas.SessionEvent as { oneOf: Json[] };
    expect(union.oneOf.map((member) => member.$ref)).toEqual(
      SESSION_EVENT_TYPES.map((type) => expect.stringMatching(new RegExp(`/${eventSchemaName(type)}$`))),
    );
  });

  it('describes MessageRequest as a client sends it: every field optional, defaults shown', () => {
    const request = doc.components.schemas.MessageRequest as { required?: string[]; properties: Record<string, Json> };
    expect(request.required ?? []).toEqual([]);
    expect(request.properties.role?.default).toBe('user');
  });
});

describe('the validator', () => {
  it('rejects a dangling $ref and a response without description, so the checks above can fail', async () => {
    const dangling = buildSessionsOpenApi();
    const health = dangling.paths['/health']?.get?.responses['200']?.content?.['application/json'];
    if (health) health.schema = { $ref: '#/components/schemas/Missing' };
    const undescribed = buildInferenceOpenApi() as unknown as { paths: Record<string, Record<string, Json>> };
    delete (undescribed.paths['/models']?.get?.responses as Record<string, Json>)['200']?.description;
    const [danglingError, undescribedError] = await validateOpenApi([dangling, undescribed]);
    expect(danglingError).toMatch(/Missing/);
    expect(undescribedError).toMatch(/description/);
  });
});
