import type { ServerResponse } from 'node:http';
import { onClientGone, type Logger } from '@tollway/service-kit';
import type { Admission, Principal } from '../admission/admission.types';
import { outputReservation } from '../admission/output-reservation';
import type { CatalogStore } from '../catalog/catalog-store';
import type { EngineRegistry } from '../engines';
import { ClientAbort } from '../engines/engine.types';
import { modelNotFound } from '../errors';
import type { ChatObservation, GatewayTelemetry } from '../observability/chat-observation';
import type { LiveRelays } from '../streaming/live-relays';
import type { PromptTokenCounter } from '../tokenizer/count-tokens';
import { checkContextLength, validateChatRequest } from '../validation/chat-request';
import { serveCompletion } from './serve-completion';
import { usageBoundsOf } from './usage-bounds';

/** What serving a chat completion needs. */
export interface ChatDeps {
  catalog: CatalogStore;
  engines: EngineRegistry;
  admission: Admission;
  logger: Logger;
  /** Output tokens reserved when a request sets neither max_tokens nor max_completion_tokens. */
  defaultOutputReservationTokens: number;
  /** Counts prompts, remembering the texts that come back turn after turn. */
  promptTokens: PromptTokenCounter;
  /** Metrics, tracing and access log; absent or all null = not observed. */
  telemetry?: GatewayTelemetry;
  /** The streams being relayed, for a shutdown to end; absent = not tracked. */
  relays?: LiveRelays;
}

/**
 * One chat completion from a parsed body: validate → count and admit → serve from the model's
 * engine (JSON or SSE). Throws for the caller's error writer before the response has started.
 */
export async function handleChat(
  deps: ChatDeps,
  body: unknown,
  principal: Principal,
  requestId: string,
  res: ServerResponse,
  observation: ChatObservation | null = null,
): Promise<void> {
  let valid;
  try {
    valid = validateChatRequest(body, deps.catalog);
  } catch (err) {
    // A refusal of a request for a model of the catalog is that model's failure, in its metrics.
    if (observation) observeNamedModel(observation, body, deps.catalog);
    throw err;
  }
  const { request, model } = valid;
  const engine = deps.engines.get(model.id);
  if (!engine) throw modelNotFound(model.id);
  observation?.modelChosen(model, request.stream === true);
  const abort = new ClientAbort();
  onClientGone(res, () => {
    abort.abort();
    observation?.clientGone();
  });
  const inputTokens = await deps.promptTokens.count(request.messages, request.tools);
  checkContextLength(request, model, inputTokens);
  const reservation = outputReservation(request, deps.defaultOutputReservationTokens);
  const usageBounds = usageBoundsOf(request, model, inputTokens);
  const reservedOutputTokens = reservation.tokens;
  const decision = deps.admission.admit({
    principal,
    modelId: model.id,
    inputTokens,
    reservedOutputTokens,
    reservationIsDefault: reservation.isDefault,
    capacity: model.capacity,
    pricePerMillion: model.price_per_million,
  });
  const ticket = observation ? await observation.admission(decision) : await decision;
  return serveCompletion(
    {
      engine,
      call: { request, signal: abort, promptTokens: inputTokens },
      ticket,
      modelId: model.id,
      inputTokens,
      reservedOutputTokens,
      usageBounds,
      requestId,
      logger: deps.logger,
      engineKind: model.engine.kind,
      observation,
      relays: deps.relays,
    },
    res,
  );
}

/** Tells `observation` the catalog model a refused body names, if it names one. */
function observeNamedModel(observation: ChatObservation, body: unknown, catalog: CatalogStore): void {
  if (typeof body !== 'object' || body === null) return;
  const { model: id, stream } = body as { model?: unknown; stream?: unknown };
  const model = typeof id === 'string' ? catalog.get(id) : undefined;
  if (model) observation.modelChosen(model, stream === true);
}
