import {
  ChatCompletionResponse,
  EngineErrorResponse,
  ErrorResponse,
  SessionErrorResponse,
  Usage,
} from '@tollway/contracts';
import { HOSTILE_ENGINE_JSON, HOSTILE_ENGINE_STREAM, REFUSING_ENGINE_JSON, REFUSING_ENGINE_STREAM } from './endpoints';
import { eventsRuleBreak, isCount } from './events-rules';
import { sessionStreamRuleBreak } from './session-stream-rules';
import { FAITHFUL_MODEL, LYING_MODEL, REFUSING_MODEL } from './hostile-engine';
import type { FuzzCase } from './fuzz-case';
import type { Outcome } from './raw-http';

/** How an answer is counted in the final `N sent, N 4xx, N 5xx, N crashes, N hangs` line. */
export type Verdict = '2xx' | '3xx' | '4xx' | '5xx' | 'upstream' | 'closed' | 'hang';

/** A broken rule, in words. */
export interface Problem {
  rule:
    | 'status'
    | 'shape'
    | 'hang'
    | 'refusal'
    | 'crash'
    | 'liveness'
    | 'memory'
    | 'consistency'
    | 'billing'
    | 'events'
    | 'request-id';
  detail: string;
}

/** The prefix of a `text/plain` engine error the inference spec allows on a 400. */
const TEXT_ENGINE_ERROR = /^Inference error: /;

export function verdictOf(c: FuzzCase, outcome: Outcome): Verdict {
  if (outcome.kind !== 'response') return outcome.kind;
  if (isUpstreamFailure(c, outcome)) return 'upstream';
  if (outcome.status >= 500) return '5xx';
  if (outcome.status >= 400) return '4xx';
  if (outcome.status >= 300) return '3xx';
  return '2xx';
}

/**
 * Judges one answer by the rules every case shares: below 500, never a hang, a 4xx in the
 * service's error shape (the envelope; on the gateway's chat endpoint also the engine's flat
 * shape or its text/plain prefix), a refusal where the request can only be refused, and the six
 * Events rules on every event stream read whole. `hostileModel` is the model a hostile-engine case
 * asked for (its stream may end in an error event unless it is the faithful engine's).
 */
export function judgeAnswer(c: FuzzCase, outcome: Outcome, hostileModel?: string): Problem[] {
  if (outcome.kind === 'hang') {
    return [
      {
        rule: 'hang',
        detail: `no complete answer in ${outcome.ms} ms${outcome.status !== null ? ` (status ${outcome.status}, ${outcome.bodyBytes} body bytes so far)` : ''}`,
      },
    ];
  }
  if (outcome.kind === 'closed') return [];
  const problems: Problem[] = [];
  const { status } = outcome;
  if (status >= 500 && !isUpstreamFailure(c, outcome))
    problems.push({ rule: 'status', detail: `status ${status}: ${snippet(outcome.body)}` });
  if (status >= 400 && c.method !== 'HEAD') {
    const shape = errorShapeProblem(c, outcome);
    if (shape) problems.push({ rule: 'shape', detail: `${status} ${shape}` });
  }
  const requestId = requestIdProblem(c, outcome);
  if (requestId) problems.push({ rule: 'request-id', detail: requestId });
  const events = eventsProblem(c, outcome, hostileModel) ?? sessionStreamProblem(c, outcome);
  if (events) problems.push({ rule: 'events', detail: events });
  const completion = completionProblem(c, outcome);
  if (completion) problems.push({ rule: 'shape', detail: completion });
  const refusal = engineRefusalProblem(c, outcome, hostileModel);
  if (refusal) problems.push({ rule: 'shape', detail: refusal });
  const lie = lyingUsageProblem(c, outcome, hostileModel);
  if (lie) problems.push({ rule: 'billing', detail: lie });
  if (status < 300 && c.mustRefuse)
    problems.push({
      rule: 'refusal',
      detail: `status ${status} for a request that must be refused: ${snippet(outcome.body)}`,
    });
  return problems;
}

/** The Events rule a 200 event stream of the gateway breaks, when its whole body was read. */
function eventsProblem(
  c: FuzzCase,
  outcome: Extract<Outcome, { kind: 'response' }>,
  hostileModel: string | undefined,
): string | null {
  if (c.service !== 'gateway' || c.method === 'HEAD' || outcome.status !== 200) return null;
  if (!(outcome.headers['content-type'] ?? '').startsWith('text/event-stream')) return null;
  if (outcome.body.length < outcome.bodyBytes) return null; // longer than the client keeps
  const hostile = c.endpoint === HOSTILE_ENGINE_JSON || c.endpoint === HOSTILE_ENGINE_STREAM;
  const wellFormed = hostileModel === FAITHFUL_MODEL || hostileModel === LYING_MODEL;
  return eventsRuleBreak({ body: outcome.body.toString('utf8'), mayBreak: hostile && !wellFormed });
}

/**
 * The rule a 200 event stream of the session service breaks (`session-stream-rules.ts`), for what
 * was read of it: a stream that follows a session is read for a window, then closed.
 */
function sessionStreamProblem(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): string | null {
  if (c.service !== 'sessions' || c.method === 'HEAD' || outcome.status !== 200) return null;
  if (!(outcome.headers['content-type'] ?? '').startsWith('text/event-stream')) return null;
  return sessionStreamRuleBreak({
    body: outcome.body.toString('utf8'),
    cut: outcome.cut === true || outcome.body.length < outcome.bodyBytes,
    send: c.method === 'POST',
  });
}

/**
 * What is wrong with a 200 JSON answer to a chat completion, when its body was read whole: it must
 * be a ChatCompletionResponse. Only for the chat path as the template has it (a mutated path may
 * reach another endpoint).
 */
function completionProblem(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): string | null {
  if (c.service !== 'gateway' || c.method !== 'POST' || outcome.status !== 200) return null;
  if (c.target !== '/v1/chat/completions' || outcome.body.length < outcome.bodyBytes) return null;
  if (!(outcome.headers['content-type'] ?? '').startsWith('application/json')) return null;
  let json: unknown;
  try {
    json = JSON.parse(outcome.body.toString('utf8'));
  } catch {
    return `a 200 chat completion that is not JSON: ${snippet(outcome.body)}`;
  }
  const parsed = ChatCompletionResponse.safeParse(json);
  if (parsed.success) return null;
  const issue = parsed.error.issues[0];
  return `a 200 chat completion that is not a ChatCompletionResponse (${issue?.path.join('.') || '(root)'}: ${issue?.message}): ${snippet(outcome.body)}`;
}

/**
 * The most tokens a request to a hostile model may be billed and shown: its context length (the
 * catalog default) for the prompt, and that much per choice for at most 128 choices.
 */
const HOSTILE_CONTEXT_LENGTH = 131_072;

/**
 * What is wrong with the usage the gateway shows for an answer of the `lying` engine, whose usage
 * is 1e308, not counts, 2^40, or counts with a `reasoning_tokens` of `"lots"`: the JSON answer's
 * usage and a stream's totals must be counts within the request's bounds, total = prompt +
 * completion, with details of the contract's shape. (A token chunk passed through keeps the
 * engine's running counts, checked as counts by the Events rules; the gateway README says so.)
 */
function lyingUsageProblem(
  c: FuzzCase,
  outcome: Extract<Outcome, { kind: 'response' }>,
  hostileModel: string | undefined,
): string | null {
  const hostile = c.endpoint === HOSTILE_ENGINE_JSON || c.endpoint === HOSTILE_ENGINE_STREAM;
  if (!hostile || hostileModel !== LYING_MODEL || outcome.status !== 200) return null;
  if (outcome.body.length < outcome.bodyBytes) return null;
  const text = outcome.body.toString('utf8');
  let usage: unknown;
  try {
    if ((outcome.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      const frames = text.trim().split('\n\n');
      usage = (JSON.parse(frames.at(-2)?.slice(6) ?? 'null') as { usage?: unknown } | null)?.usage;
    } else usage = (JSON.parse(text) as { usage?: unknown }).usage;
  } catch {
    return null; // not JSON: the Events rules and the completion check say so
  }
  const u = (usage ?? {}) as Record<string, unknown>;
  const counts = isCount(u.prompt_tokens) && isCount(u.completion_tokens) && isCount(u.total_tokens);
  if (
    !counts ||
    (u.prompt_tokens as number) > HOSTILE_CONTEXT_LENGTH ||
    (u.completion_tokens as number) > HOSTILE_CONTEXT_LENGTH * 128 ||
    u.total_tokens !== (u.prompt_tokens as number) + (u.completion_tokens as number)
  ) {
    return `a lying engine's usage reached the client: ${JSON.stringify(usage)}`;
  }
  if (!Usage.safeParse(usage).success) return `usage details no client can parse reached it: ${JSON.stringify(usage)}`;
  return null;
}

/**
 * What is wrong with the gateway's answer to an engine's refusal (the `refuses` engine): but for a
 * parameter refusal (400), it must not quote the engine's message (it names the gateway's own
 * key), and a 429 must carry a wait a client can use, 1 ms to 60 s, whatever the engine's retry
 * headers said.
 */
function engineRefusalProblem(
  c: FuzzCase,
  outcome: Extract<Outcome, { kind: 'response' }>,
  hostileModel: string | undefined,
): string | null {
  const refusing =
    c.endpoint === REFUSING_ENGINE_JSON ||
    c.endpoint === REFUSING_ENGINE_STREAM ||
    ((c.endpoint === HOSTILE_ENGINE_JSON || c.endpoint === HOSTILE_ENGINE_STREAM) && hostileModel === REFUSING_MODEL);
  if (!refusing) return null;
  // A 400 is the engine's parameter refusal, passed on as the spec says; any other answer is the gateway's own.
  if (outcome.status !== 400 && outcome.body.toString('latin1').includes('sk-engine-'))
    return `the engine's message reached the client: ${snippet(outcome.body)}`;
  if (outcome.status !== 429) return null;
  const wait = outcome.headers['retry-after-ms'] ?? '';
  if (!/^\d+$/.test(wait) || Number(wait) < 1 || Number(wait) > 60_000)
    return `a 429 with retry-after-ms ${JSON.stringify(wait)}`;
  return null;
}

/** The request ids both services accept from a client and echo (service-kit's rule). */
const ACCEPTABLE_REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * An answer's `x-request-id`, when it has one, is sent once and is safe to land in a log line or a
 * header: the client's own id when that was one acceptable value, never a client's value that was
 * not (it would carry whatever the client put in it), else a fresh id of the same alphabet.
 */
function requestIdProblem(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): string | null {
  const answered = outcome.headers['x-request-id'];
  if (answered === undefined) return null;
  if (outcome.repeatedHeaders?.includes('x-request-id')) return 'x-request-id sent more than once';
  if (!ACCEPTABLE_REQUEST_ID.test(answered)) return `x-request-id ${JSON.stringify(answered)} is not a safe id`;
  const sent = c.headers.filter(([name]) => name.toLowerCase() === 'x-request-id').map(([, value]) => value);
  const [only] = sent;
  if (sent.length === 1 && typeof only === 'string' && ACCEPTABLE_REQUEST_ID.test(only) && answered !== only)
    return `x-request-id ${JSON.stringify(answered)} instead of the client's ${JSON.stringify(only)}`;
  return null;
}

/** Templates whose model's engine misbehaves or refuses. */
const ENGINE_FAILURE_TEMPLATES = new Set([
  HOSTILE_ENGINE_JSON,
  HOSTILE_ENGINE_STREAM,
  REFUSING_ENGINE_JSON,
  REFUSING_ENGINE_STREAM,
]);

/**
 * A 502 or 504 in the gateway envelope for a model whose engine misbehaves: what the issue asks
 * for (an engine answer past the limits, cut, silent), so not a failure of the gateway.
 */
function isUpstreamFailure(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): boolean {
  if (!ENGINE_FAILURE_TEMPLATES.has(c.endpoint)) return false;
  if (outcome.status !== 502 && outcome.status !== 504) return false;
  try {
    return ErrorResponse.safeParse(JSON.parse(outcome.body.toString('utf8'))).success;
  } catch {
    return false;
  }
}

function errorShapeProblem(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): string | null {
  const text = outcome.body.toString('utf8');
  if (outcome.bodyBytes === 0) return 'with an empty body (not the error shape)';
  const type = outcome.headers['content-type'] ?? '';
  const chat = c.service === 'gateway' && c.target.startsWith('/v1/chat/completions');
  if (chat && outcome.status === 400 && type.startsWith('text/plain') && TEXT_ENGINE_ERROR.test(text)) return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return `with a body that is not JSON (${type || 'no content-type'}): ${snippet(outcome.body)}`;
  }
  if (c.service === 'sessions')
    return SessionErrorResponse.safeParse(json).success
      ? null
      : `not in the session error shape: ${snippet(outcome.body)}`;
  if (ErrorResponse.safeParse(json).success) {
    const code = (json as { error: { code?: unknown } }).error.code;
    if (outcome.status === 401 && code !== undefined) return 'a 401 envelope must have no code field';
    return null;
  }
  if (chat && EngineErrorResponse.safeParse(json).success) return null;
  return `not in the gateway error shape: ${snippet(outcome.body)}`;
}

function snippet(body: Buffer): string {
  const text = body.toString('utf8');
  return JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}…` : text);
}
