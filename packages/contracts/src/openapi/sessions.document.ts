import { MessageRequest, MessageResponse } from '../sessions/message.schema.js';
import {
  ChatMessage,
  ChatMessageRole,
  CreateSessionRequest,
  HealthResponse,
  SessionErrorResponse,
  SessionResponse,
  SessionStateMessage,
  SessionStatus,
  SessionSummary,
  SessionSummaryList,
} from '../sessions/session.schema.js';
import { TraceMetrics, WebhookPayload, WebhookSpec } from '../sessions/webhook.schema.js';
import {
  AgentCustomEvent,
  MessageDeltaEvent,
  SessionEvent,
  StreamTruncatedEvent,
  ToolCallDeltaEvent,
  ToolResultEvent,
  TurnCancelledEvent,
  TurnCompletedEvent,
  TurnFailedEvent,
  TurnStartedEvent,
} from '../sessions/session-event.schema.js';
import { componentSchemas, JSON_SCHEMA_DIALECT, schemaRef } from './json-schema.js';
import type { OpenApiDocument, OpenApiOperation, OpenApiParameter, OpenApiResponse } from './openapi.types.js';

/** Version of the session service's interface description (the spec names none; this is the package's). */
export const SESSIONS_API_VERSION = '0.1.0';

const json = (description: string, name: string): OpenApiResponse => ({
  description,
  content: { 'application/json': { schema: schemaRef(name) } },
});

const error = (description: string): OpenApiResponse => json(description, 'SessionErrorResponse');

const LOCATION = {
  Location: { description: 'The session URL, `/sessions/{session_id}`.', schema: { type: 'string' } },
};

const SESSION_ID: OpenApiParameter = {
  name: 'session_id',
  in: 'path',
  required: true,
  description: 'The session UUID.',
  schema: { type: 'string', format: 'uuid' },
};

const UNAUTHORIZED = error('Missing or unknown API key (when the service runs with auth, its default).');
const NOT_FOUND = error('Session not found.');
const TOO_LARGE = error(
  'The body is larger than the configured limit (`request_too_large`), or the session history would pass its limit (`history_too_large`).',
);
const UNAVAILABLE = error('The session store (Redis) is unreachable (`service_unavailable`).');
const TOO_MANY_STREAMS = error(
  'The organization holds its most event streams on this server (`too_many_streams`, with `Retry-After`); close one first.',
);

/** An answer that is the session's events as Server-Sent Events. */
const eventStream = (description: string): OpenApiResponse => ({
  description:
    `${description} Each event is one frame: \`id:\` its position in the session's event log (resume after it with \`Last-Event-ID\`), ` +
    '`event:` its type, `data:` one JSON `SessionEvent`. The first frame carries `retry:` and, for a new reader, an `id:` alone ' +
    '(where the stream starts); `: keep-alive` comments come while nothing happens.',
  content: { 'text/event-stream': { schema: schemaRef('SessionEvent') } },
});

const createBody = {
  required: false,
  description: 'Optional: `{}` or no body gives an empty session; `state` preloads the history.',
  content: { 'application/json': { schema: schemaRef('CreateSessionRequest') } },
};

const TURN_COMPLETE_CALLBACK: Record<string, Record<string, OpenApiOperation>> = {
  '{$request.body#/webhook/url}': {
    post: {
      operationId: 'turnComplete',
      summary: 'Turn-complete callback',
      description:
        'POSTed once when the turn ends by success, error or cancellation; `Authorization: Bearer <token>` when the WebhookSpec has a token. Each attempt times out after 10 seconds; failures are logged, never retried.',
      requestBody: { required: true, content: { 'application/json': { schema: schemaRef('WebhookPayload') } } },
      responses: { '2XX': { description: 'Received. Any other answer is logged and dropped.' } },
    },
  },
};

function sessionPaths(): OpenApiDocument['paths'] {
  return {
    '/health': {
      get: {
        operationId: 'getHealth',
        summary: 'Health and worker counts',
        tags: ['health'],
        security: [],
        responses: { '200': json('The service is reachable.', 'HealthResponse') },
      },
    },
    '/sessions': {
      post: {
        operationId: 'createSession',
        summary: 'Create a session',
        tags: ['sessions'],
        requestBody: createBody,
        responses: {
          '201': { ...json('Created, `idle`.', 'SessionResponse'), headers: LOCATION },
          '400': error('Malformed body (bad JSON or `state` items).'),
          '401': UNAUTHORIZED,
          '413': TOO_LARGE,
          '429': error(
            'The organization holds as many sessions as its own limit allows (`organization_session_limit`).',
          ),
          '503': error('The `--max-sessions` limit is reached, or the session store is unreachable.'),
        },
      },
      get: {
        operationId: 'listSessions',
        summary: 'List sessions',
        tags: ['sessions'],
        responses: {
          '200': json('Every session (of the caller).', 'SessionSummaryList'),
          '401': UNAUTHORIZED,
          '503': UNAVAILABLE,
        },
      },
    },
    '/sessions/{session_id}': {
      put: {
        operationId: 'createSessionWithId',
        summary: 'Create a session with a client-chosen id',
        tags: ['sessions'],
        parameters: [SESSION_ID],
        requestBody: createBody,
        responses: {
          '201': { ...json('Created, `idle`.', 'SessionResponse'), headers: LOCATION },
          '400': error('The id is not a valid UUID, or the body is malformed.'),
          '401': UNAUTHORIZED,
          '405': error('Custom session ids are not enabled (`--allow-custom-ids`).'),
          '409': error('A session with this id already exists.'),
          '413': TOO_LARGE,
          '429': error(
            'The organization holds as many sessions as its own limit allows (`organization_session_limit`).',
          ),
          '503': error('The `--max-sessions` limit is reached, or the session store is unreachable.'),
        },
      },
      get: {
        operationId: 'getSession',
        summary: 'Read a session, optionally long-polling until it is no longer running',
        tags: ['sessions'],
        parameters: [
          SESSION_ID,
          {
            name: 'wait',
            in: 'query',
            description: 'Block until the status is no longer `running`.',
            schema: { type: 'boolean', default: false },
          },
          {
            name: 'timeout',
            in: 'query',
            description: 'Seconds to wait at most; when it elapses first the answer is 200 with `running`.',
            schema: { type: 'number', minimum: 0 },
          },
        ],
        responses: {
          '200': json(
            'The session: `idle` after success, `error` after a failure, `running` on timeout.',
            'SessionResponse',
          ),
          '400': error('Bad `wait` or `timeout` value.'),
          '401': UNAUTHORIZED,
          '404': error('Session not found, also when it is deleted during the wait.'),
          '503': UNAVAILABLE,
        },
      },
      delete: {
        operationId: 'deleteSession',
        summary: 'Delete a session, cancelling a running turn',
        tags: ['sessions'],
        parameters: [SESSION_ID],
        responses: {
          '204': { description: 'Deleted; empty body.' },
          '401': UNAUTHORIZED,
          '404': NOT_FOUND,
          '503': UNAVAILABLE,
        },
      },
    },
    '/sessions/{session_id}/events': {
      get: {
        operationId: 'streamSessionEvents',
        summary: "The session's events as they happen (Server-Sent Events), resumable on any replica",
        tags: ['events'],
        parameters: [
          SESSION_ID,
          {
            name: 'follow',
            in: 'query',
            description:
              'false (default): the stream ends after the next ending event (`turn.completed`, `turn.failed`, `turn.cancelled`) of the turn running now or the next one. true: it follows the session across turns until the session is deleted.',
            schema: { type: 'boolean', default: false },
          },
          {
            name: 'last_event_id',
            in: 'query',
            description: 'Resume after this event id (for clients that cannot send the header); the header wins.',
            schema: { type: 'string', pattern: '^\\d{1,20}-\\d{1,20}$' },
          },
          {
            name: 'Last-Event-ID',
            in: 'header',
            description:
              'Resume after this event id, as EventSource sends it when it reconnects: every later event comes once. Without it, a reader starts at the start of the turn running now (the text written so far comes again), else at the next event.',
            schema: { type: 'string', pattern: '^\\d{1,20}-\\d{1,20}$' },
          },
        ],
        responses: {
          '200': eventStream('The events.'),
          '400': error(
            'A bad `follow`, or a `Last-Event-ID` / `last_event_id` that is not an event id (`param` names it).',
          ),
          '401': UNAUTHORIZED,
          '404': error("Session not found (also a deleted one, and another organization's)."),
          '429': TOO_MANY_STREAMS,
          '503': UNAVAILABLE,
        },
      },
    },
    '/sessions/{session_id}/messages': {
      post: {
        operationId: 'sendMessage',
        summary: 'Send a message; the turn runs in the background',
        tags: ['messages'],
        parameters: [SESSION_ID],
        description:
          "With `Accept: text/event-stream` (preferred to JSON) the answer is 200 with the turn's events, from `turn.started` to its ending event; every other client gets the 202.",
        requestBody: { required: true, content: { 'application/json': { schema: schemaRef('MessageRequest') } } },
        responses: {
          '200': {
            ...eventStream(
              "Accepted, answered as a stream (the request asked for `text/event-stream`): the turn's events, ending with its ending event.",
            ),
            headers: { Location: { description: '`/sessions/{session_id}`.', schema: { type: 'string' } } },
          },
          '202': {
            ...json('Accepted; the session is `running`.', 'MessageResponse'),
            headers: { Location: { description: '`/sessions/{session_id}`.', schema: { type: 'string' } } },
          },
          '400': error('Malformed body or webhook spec.'),
          '401': UNAUTHORIZED,
          '404': NOT_FOUND,
          '409': error('The session is already processing a message.'),
          '413': TOO_LARGE,
          '429': error(
            'The organization has as many turns waiting as its limit allows (`turn_queue_full`); `retry-after` and `retry-after-ms` say when to try again. Nothing was written. Or, for a send answered as a stream, it holds its most event streams on this server (`too_many_streams`).',
          ),
          '503': UNAVAILABLE,
        },
        callbacks: { turnComplete: TURN_COMPLETE_CALLBACK },
      },
      get: {
        operationId: 'listMessages',
        summary: 'The full history, in chronological order',
        tags: ['messages'],
        parameters: [SESSION_ID],
        responses: {
          '200': {
            description: 'The history.',
            content: { 'application/json': { schema: { type: 'array', items: schemaRef('ChatMessage') } } },
          },
          '401': UNAUTHORIZED,
          '404': NOT_FOUND,
          '503': UNAVAILABLE,
        },
      },
    },
  };
}

/** Builds the OpenAPI 3.1 document of the agent session service, including the webhook callback. */
export function buildSessionsOpenApi(): OpenApiDocument {
  const requestSchemas = componentSchemas(
    { CreateSessionRequest, SessionStateMessage, MessageRequest, WebhookSpec, ChatMessageRole },
    'input',
  );
  const responseSchemas = componentSchemas(
    {
      HealthResponse,
      SessionResponse,
      SessionSummary,
      SessionSummaryList,
      SessionStatus,
      ChatMessage,
      MessageResponse,
      WebhookPayload,
      TraceMetrics,
      SessionErrorResponse,
      SessionEvent,
      TurnStartedEvent,
      MessageDeltaEvent,
      ToolCallDeltaEvent,
      ToolResultEvent,
      AgentCustomEvent,
      TurnCompletedEvent,
      TurnFailedEvent,
      TurnCancelledEvent,
      StreamTruncatedEvent,
    },
    'output',
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tollway agent session API',
      version: SESSIONS_API_VERSION,
      description:
        'Sessions with an agent: send a message, the turn runs on a worker, read the result by (long-)polling, a webhook, or its stream of events as it runs.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    jsonSchemaDialect: JSON_SCHEMA_DIALECT,
    servers: [{ url: '/', description: 'The session service root.' }],
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'health', description: 'Liveness and worker counts' },
      { name: 'sessions', description: 'Session lifecycle' },
      { name: 'messages', description: 'Turns and history' },
      { name: 'events', description: "A session's turns as they run" },
    ],
    paths: sessionPaths(),
    components: {
      schemas: { ...requestSchemas, ...responseSchemas },
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An organization API key (unless auth is off).' },
      },
    },
  };
}
