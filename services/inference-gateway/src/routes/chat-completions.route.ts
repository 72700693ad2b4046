import type { RequestHandler } from 'express';
import type { Logger } from '@tollway/service-kit';
import type { Admission } from '../admission/admission.types';
import { outputReservation } from '../admission/output-reservation';
import type { CatalogStore } from '../catalog/catalog-store';
import { serveCompletion } from '../completions/serve-completion';
import type { EngineRegistry } from '../engines';
import { modelNotFound } from '../errors';
import { principalOf } from '../http/auth.middleware';
import { countPromptTokens } from '../tokenizer/count-tokens';
import { validateChatRequest } from '../validation/chat-request';

/** What the chat route needs. */
export interface ChatCompletionsDeps {
  catalog: CatalogStore;
  engines: EngineRegistry;
  admission: Admission;
  logger: Logger;
  /** Output tokens reserved when a request sets neither max_tokens nor max_completion_tokens. */
  defaultOutputReservationTokens: number;
}

/** `POST /chat/completions`: validate → admit → serve from the model's engine (JSON or SSE). */
export function chatCompletionsHandler(deps: ChatCompletionsDeps): RequestHandler {
  return async (req, res) => {
    const { request, model } = validateChatRequest(req.body, deps.catalog);
    const engine = deps.engines.get(model.id);
    if (!engine) throw modelNotFound(model.id);
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    const inputTokens = countPromptTokens(request.messages);
    const reservedOutputTokens = outputReservation(request, deps.defaultOutputReservationTokens).tokens;
    const ticket = await deps.admission.admit({
      principal: principalOf(res),
      modelId: model.id,
      inputTokens,
      reservedOutputTokens,
      capacity: model.capacity,
      pricePerMillion: model.price_per_million,
    });
    await serveCompletion(
      {
        engine,
        call: { request, signal: controller.signal },
        ticket,
        modelId: model.id,
        inputTokens,
        reservedOutputTokens,
        requestId: req.id,
        logger: deps.logger,
      },
      res,
    );
  };
}
