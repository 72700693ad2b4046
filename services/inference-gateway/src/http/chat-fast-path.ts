import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  fromBodyParserError,
  readJsonBody,
  REQUEST_ID_HEADER,
  requestIdOf,
  type JsonBodyLimits,
} from '@tollway/service-kit';
import { ORGANIZATION_HEADER } from '@tollway/contracts';
import type { Authenticator } from '../admission/admission.types';
import { handleChat, type ChatDeps } from '../completions/handle-chat';
import { invalidApiKey } from '../errors';
import { ChatObservation, telemetryOn } from '../observability/chat-observation';
import { writeError } from './write-error';

const CHAT_PATH = '/v1/chat/completions';
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** What the fast path needs besides the chat dependencies. */
export interface FastPathDeps extends ChatDeps {
  authenticator: Authenticator;
  /** Body size (decoded) and JSON nesting limits. */
  bodyLimits: JsonBodyLimits;
}

/**
 * `POST /v1/chat/completions` straight on node:http, ahead of express: the one hot path skips
 * express's per-request setup and router walk (about 100 µs of CPU per request on a small
 * machine, more than the rest of the gateway's work). Same behaviour as the express route:
 * request id, key check, body limit, JSON, then the shared `handleChat`, errors written by the
 * same rules as the error middlewares. Returns false for any other request.
 */
export function chatFastPath(deps: FastPathDeps): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    if (req.method !== 'POST' || (req.url !== CHAT_PATH && !req.url?.startsWith(`${CHAT_PATH}?`))) return false;
    // The id leaves with each writeHead (serve-completion.ts, write-error.ts), never by setHeader:
    // one header set before writeHead makes node put every header of the answer through setHeader
    // and its map (a quarter of a bare node:http answer's CPU; the README's "Performance").
    const requestId = requestIdOf(req.headers[REQUEST_ID_HEADER]);
    const observation = telemetryOn(deps.telemetry)
      ? new ChatObservation(deps.telemetry, requestId, req.headers)
      : null;
    serve(deps, req, res, requestId, observation).then(
      () => observation?.finish(res),
      (err: unknown) => {
        // Whatever is left of a refused body is read and dropped so the connection can be reused.
        if (!req.complete) req.resume();
        writeError(res, err, deps.logger, requestId);
        observation?.finish(res, err);
      },
    );
    return true;
  };
}

async function serve(
  deps: FastPathDeps,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  observation: ChatObservation | null,
): Promise<void> {
  const header = req.headers.authorization;
  const token = header ? BEARER.exec(header)?.[1] : undefined;
  const organization = req.headers[ORGANIZATION_HEADER];
  const principal = await deps.authenticator.authenticate(
    token,
    typeof organization === 'string' ? organization : undefined,
  );
  if (!principal) throw invalidApiKey();
  observation?.authenticated(principal);
  let body: unknown;
  try {
    // No body at all is not JSON either: `invalid_json`, as a JSON `null` (a body that is not an
    // object) and as the express route answers it.
    body = await readJsonBody(req, deps.bodyLimits);
  } catch (err) {
    throw fromBodyParserError(err) ?? err;
  }
  return handleChat(deps, body, principal, requestId, res, observation);
}
