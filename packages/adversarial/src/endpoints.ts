import { Ref, type JsonNode } from './hostile-json';
import type { ServiceName } from './fuzz-case';
import { FAITHFUL_MODEL, REFUSING_MODEL } from './hostile-engine';

/** Names of the templates whose model is served by the hostile engine: a 502/504 there is the right answer. */
export const HOSTILE_ENGINE_JSON = 'POST /v1/chat/completions (hostile engine)';
export const HOSTILE_ENGINE_STREAM = 'POST /v1/chat/completions (hostile engine, stream)';
/** Names of the templates whose model only refuses (hostile-engine.ts's `refuses`): a 502 is right there too. */
export const REFUSING_ENGINE_JSON = 'POST /v1/chat/completions (refusing engine)';
export const REFUSING_ENGINE_STREAM = 'POST /v1/chat/completions (refusing engine, stream)';

/** A valid request of one endpoint: where every mutation starts. */
export interface EndpointTemplate {
  service: ServiceName;
  name: string;
  method: string;
  /** Path segments (placeholders allowed); a mutation may replace any one. */
  segments: string[];
  /** Query string without `?`, or null. */
  query: string | null;
  /**
   * `console`: the operator's console session (cookie and CSRF token), signed in at the start;
   * `tenant`: another organization's admin key, on what only the operator or the victim's own
   * admins may reach, or its standard key on the fuzz organization's sessions (the session service
   * refuses admin keys outright), so every such request must be refused;
   * `borrowed`: the fuzz organization's key naming the victim organization in
   * `x-tollway-organization`, to be billed as it: only a service key may, so it must be refused.
   */
  credential: 'org' | 'admin' | 'console' | 'tenant' | 'borrowed' | 'none';
  body: JsonNode | null;
  /** Headers the request carries besides its credential and content type. */
  headers?: Array<[string, string]>;
}

/** The mark on the names of the templates answered with an event stream that stays open. */
export const EVENT_STREAM = '(event stream)';

/** The mark on the names of the session templates sent with another organization's key. */
export const ANOTHER_ORGANIZATION = '(another organization)';

const chatMessages = (): JsonNode => [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hello there', name: 'alice' },
];

const tools = (): JsonNode => [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

/** Every parameter of the inference spec set to a valid value, so each can be attacked. */
const fullChatBody = (stream: boolean): JsonNode => ({
  model: 'tollway/sim-chat',
  messages: chatMessages(),
  max_tokens: 8,
  temperature: 0.7,
  top_p: 0.9,
  top_k: 40,
  n: 1,
  stop: ['\n\n', 'END'],
  stream,
  ...(stream ? { stream_options: { include_usage: true } } : {}),
  presence_penalty: 0,
  frequency_penalty: 0,
  seed: 42,
  logprobs: true,
  top_logprobs: 2,
  logit_bias: { '50256': -100, '1000': 5 },
  response_format: { type: 'text' },
  tools: tools(),
  tool_choice: 'auto',
  user: 'user-1',
});

const budgets = (): JsonNode => ({ requests: 1000, input_tokens: 100000, output_tokens: 100000 });

/** Every session limit set (the `param` and `value` mutations then reach each one). */
const sessionLimits = (): JsonNode => ({ sessions: 100, running_turns: 4, waiting_turns: 1000, weight: 2 });

const sessionState = (): JsonNode => [
  { role: 'user', content: 'Earlier question' },
  { role: 'assistant', content: 'Earlier answer' },
];

const messageBody = (): JsonNode => ({
  content: 'What is 2+2?',
  role: 'user',
  user_params: { model: 'tollway/sim-chat', temperature: 0.5, max_tokens: 8, tags: ['a', 'b'], nested: { k: 1 } },
  webhook: { url: new Ref('webhookUrl'), token: 'hook-token-1', include_messages: true },
  name: 'bob',
});

const toolMessageBody = (): JsonNode => ({
  content: '4',
  role: 'tool',
  tool_call_id: 'call_1',
  name: 'calculator',
  tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'calculator', arguments: '{"x":2}' } }],
  base64_image: 'iVBORw0KGgo=',
});

const t = (
  service: ServiceName,
  method: string,
  path: string,
  credential: EndpointTemplate['credential'],
  body: JsonNode | null = null,
  query: string | null = null,
  name = `${method} ${path}${query ? `?${query}` : ''}`,
): EndpointTemplate => ({ service, name, method, segments: path.split('/').slice(1), query, credential, body });

/** Every endpoint of the gateway (inference API, admin API, probes), from its routers. */
export function gatewayEndpoints(): EndpointTemplate[] {
  const admin = '/admin/v1/organizations';
  return [
    t('gateway', 'GET', '/healthz', 'none'),
    t('gateway', 'GET', '/readyz', 'none'),
    t('gateway', 'GET', '/openapi.json', 'none'),
    t('gateway', 'GET', '/v1/models', 'org'),
    t('gateway', 'GET', '/v1/models/tollway/sim-chat', 'org'),
    t('gateway', 'GET', '/v1/models/tollway%2Fsim-narrow', 'org'),
    t('gateway', 'POST', '/v1/chat/completions', 'org', fullChatBody(false), null, 'POST /v1/chat/completions (JSON)'),
    t('gateway', 'POST', '/v1/chat/completions', 'org', fullChatBody(true), null, 'POST /v1/chat/completions (stream)'),
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: 'tollway/sim-narrow', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, n: 1 },
      null,
      'POST /v1/chat/completions (narrowed)',
    ),
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      {
        model: 'tollway/sim-reasoner',
        messages: [{ role: 'user', content: 'hi' }],
        max_completion_tokens: 16,
        reasoning_effort: 'low',
        stream: true,
      },
      null,
      'POST /v1/chat/completions (reasoner stream)',
    ),
    // A healthy engine over HTTP (hostile-engine.ts's faithful one): the passthrough relay of its
    // chunks, the usage it reports, its replica given back after [DONE], under hostile clients.
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: FAITHFUL_MODEL, messages: chatMessages(), max_tokens: 6 },
      null,
      'POST /v1/chat/completions (faithful engine)',
    ),
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: FAITHFUL_MODEL, messages: chatMessages(), max_tokens: 6, stream: true },
      null,
      'POST /v1/chat/completions (faithful engine, stream)',
    ),
    // An engine that refuses every request, with hostile retry headers and its key in its message.
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: REFUSING_MODEL, messages: chatMessages(), max_tokens: 6 },
      null,
      REFUSING_ENGINE_JSON,
    ),
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: REFUSING_MODEL, messages: chatMessages(), max_tokens: 6, stream: true },
      null,
      REFUSING_ENGINE_STREAM,
    ),
    // A model whose engine misbehaves (see hostile-engine.ts; which one: the case's `pick`).
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: new Ref('hostileModel'), messages: chatMessages(), max_tokens: 8 },
      null,
      HOSTILE_ENGINE_JSON,
    ),
    t(
      'gateway',
      'POST',
      '/v1/chat/completions',
      'org',
      { model: new Ref('hostileModel'), messages: chatMessages(), max_tokens: 8, stream: true },
      null,
      HOSTILE_ENGINE_STREAM,
    ),
    t('gateway', 'GET', admin, 'admin'),
    t('gateway', 'POST', admin, 'admin', {
      name: 'Fuzz Org',
      budgets: budgets(),
      credit: 5,
      session_limits: sessionLimits(),
    }),
    t('gateway', 'GET', `${admin}/{victimOrgId}`, 'admin'),
    t('gateway', 'PATCH', `${admin}/{victimOrgId}`, 'admin', {
      name: 'Renamed',
      budgets: { requests: 50 },
      credit_top_up: 1.5,
    }),
    t(
      'gateway',
      'PATCH',
      `${admin}/{victimOrgId}`,
      'admin',
      { session_limits: { sessions: 100, running_turns: 4, waiting_turns: null, weight: 2 } },
      null,
      'PATCH /admin/v1/organizations/{id} (session limits)',
    ),
    t('gateway', 'DELETE', `${admin}/{victimOrgId}`, 'admin'),
    t('gateway', 'GET', `${admin}/{victimOrgId}/usage`, 'admin', null, 'minutes=60'),
    t('gateway', 'POST', `${admin}/{victimOrgId}/keys`, 'admin', { name: 'fuzz key' }),
    t('gateway', 'GET', `${admin}/{victimOrgId}/keys`, 'admin'),
    t('gateway', 'DELETE', `${admin}/{victimOrgId}/keys/{victimKeyId}`, 'admin'),
    t('gateway', 'POST', `${admin}/{victimOrgId}/keys`, 'admin', { name: 'fuzz admin key', role: 'admin' }),
    t('gateway', 'GET', '/admin/v1/models', 'admin'),
    t('gateway', 'GET', '/metrics', 'none'),
    // The console: its page, and sign-in with a wrong token (a 401 that also feeds the sign-in limit).
    t('gateway', 'GET', '/console/', 'none'),
    t('gateway', 'POST', '/console/api/session', 'none', { token: 'not-the-admin-token' }),
    t('gateway', 'GET', '/console/api/session', 'none'),
    t('gateway', 'DELETE', '/console/api/session', 'none'),
    // The admin API as the console calls it: a session cookie, and the CSRF token on writes.
    t('gateway', 'GET', '/console/api/session', 'console', null, null, 'GET /console/api/session (signed in)'),
    t('gateway', 'GET', `${admin}/{victimOrgId}`, 'console', null, null, 'GET /admin/v1/organizations/{id} (console)'),
    t(
      'gateway',
      'PATCH',
      `${admin}/{victimOrgId}`,
      'console',
      { name: 'Renamed in the console', credit_top_up: 0.5, session_limits: { weight: 3, running_turns: null } },
      null,
      'PATCH /admin/v1/organizations/{id} (console)',
    ),
    t(
      'gateway',
      'POST',
      `${admin}/{victimOrgId}/keys`,
      'console',
      { name: 'console key' },
      null,
      'POST /admin/v1/organizations/{id}/keys (console)',
    ),
    t(
      'gateway',
      'DELETE',
      `${admin}/{victimOrgId}/keys/{victimKeyId}`,
      'console',
      null,
      null,
      'DELETE /admin/v1/organizations/{id}/keys/{keyId} (console)',
    ),
    // Another organization's admin: the operator's endpoints and the victim's records are out of reach.
    ...[
      t('gateway', 'GET', admin, 'tenant'),
      t('gateway', 'POST', admin, 'tenant', { name: 'Tenant Org', budgets: budgets(), credit: 5 }),
      t('gateway', 'GET', `${admin}/{victimOrgId}`, 'tenant'),
      t('gateway', 'PATCH', `${admin}/{victimOrgId}`, 'tenant', { name: 'Taken over' }),
      t(
        'gateway',
        'PATCH',
        `${admin}/{victimOrgId}`,
        'tenant',
        { session_limits: { running_turns: 1 } },
        null,
        'PATCH /admin/v1/organizations/{id} (session limits)',
      ),
      t('gateway', 'DELETE', `${admin}/{victimOrgId}`, 'tenant'),
      t('gateway', 'GET', `${admin}/{victimOrgId}/usage`, 'tenant'),
      t('gateway', 'GET', `${admin}/{victimOrgId}/keys`, 'tenant'),
      t('gateway', 'POST', `${admin}/{victimOrgId}/keys`, 'tenant', { name: 'planted', role: 'admin' }),
      t('gateway', 'DELETE', `${admin}/{victimOrgId}/keys/{victimKeyId}`, 'tenant'),
    ].map((template) => ({ ...template, name: `${template.name} (another organization's admin)` })),
    // The fuzz organization's key asking to act for (and bill) the victim organization.
    ...[
      t('gateway', 'GET', '/v1/models', 'borrowed'),
      t(
        'gateway',
        'POST',
        '/v1/chat/completions',
        'borrowed',
        fullChatBody(false),
        null,
        'POST /v1/chat/completions (JSON)',
      ),
      t(
        'gateway',
        'POST',
        '/v1/chat/completions',
        'borrowed',
        fullChatBody(true),
        null,
        'POST /v1/chat/completions (stream)',
      ),
    ].map((template) => ({ ...template, name: `${template.name} (another organization named)` })),
  ];
}

/** Every endpoint of the session service, from its routers. */
export function sessionEndpoints(): EndpointTemplate[] {
  return [
    t('sessions', 'GET', '/health', 'none'),
    t('sessions', 'GET', '/healthz', 'none'),
    t('sessions', 'GET', '/readyz', 'none'),
    t('sessions', 'GET', '/metrics', 'none'),
    t('sessions', 'GET', '/openapi.json', 'none'),
    t('sessions', 'POST', '/sessions', 'org', {}),
    t('sessions', 'POST', '/sessions', 'org', { state: sessionState() }, null, 'POST /sessions (state)'),
    t('sessions', 'PUT', '/sessions/{newSessionId}', 'org', { state: sessionState() }),
    t('sessions', 'GET', '/sessions', 'org'),
    t('sessions', 'GET', '/sessions/{sessionId}', 'org'),
    t(
      'sessions',
      'GET',
      '/sessions/{sessionId}',
      'org',
      null,
      'wait=true&timeout=0.5',
      'GET /sessions/{id} (long-poll)',
    ),
    t('sessions', 'DELETE', '/sessions/{sessionId}', 'org'),
    t('sessions', 'POST', '/sessions/{sessionId}/messages', 'org', messageBody()),
    t(
      'sessions',
      'POST',
      '/sessions/{sessionId}/messages',
      'org',
      toolMessageBody(),
      null,
      'POST /sessions/{id}/messages (tool)',
    ),
    t('sessions', 'GET', '/sessions/{sessionId}/messages', 'org'),
    ...[
      t('sessions', 'GET', '/sessions/{sessionId}/events', 'org'),
      t('sessions', 'GET', '/sessions/{sessionId}/events', 'org', null, 'follow=true&last_event_id=0-0'),
      { ...t('sessions', 'GET', '/sessions/{sessionId}/events', 'org'), headers: [['Last-Event-ID', '0-0']] },
      {
        ...t('sessions', 'POST', '/sessions/{sessionId}/messages', 'org', messageBody()),
        headers: [['Accept', 'text/event-stream']],
      },
    ].map((template) => ({ ...template, name: `${template.name} ${EVENT_STREAM}` }) as EndpointTemplate),
    // Another organization's key on the fuzz organization's sessions: every one is out of reach. (Not
    // PUT: a session the fuzz deleted unseen frees its id, which is then anyone's to create; the
    // session service's own tests check a PUT over another organization's live session.)
    ...[
      t('sessions', 'GET', '/sessions/{sessionId}', 'tenant'),
      t('sessions', 'DELETE', '/sessions/{sessionId}', 'tenant'),
      t('sessions', 'POST', '/sessions/{sessionId}/messages', 'tenant', messageBody()),
      t('sessions', 'GET', '/sessions/{sessionId}/messages', 'tenant'),
      t('sessions', 'GET', '/sessions/{sessionId}/events', 'tenant', null, 'follow=true'),
      {
        ...t('sessions', 'POST', '/sessions/{sessionId}/messages', 'tenant', messageBody()),
        headers: [['Accept', 'text/event-stream']] as Array<[string, string]>,
        name: 'POST /sessions/{sessionId}/messages (stream)',
      },
    ].map((template) => ({ ...template, name: `${template.name} ${ANOTHER_ORGANIZATION}` })),
  ];
}
