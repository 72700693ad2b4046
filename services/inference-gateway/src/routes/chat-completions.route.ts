import type { RequestHandler } from 'express';
import { handleChat, type ChatDeps } from '../completions/handle-chat';
import { principalOf } from '../http/auth.middleware';

/**
 * `POST /chat/completions` inside express. Servers made by `app.listen` answer this path on the
 * fast path (http/chat-fast-path.ts) before express; this route serves apps mounted elsewhere.
 */
export function chatCompletionsHandler(deps: ChatDeps): RequestHandler {
  return (req, res) => handleChat(deps, req.body, principalOf(res), req.id, res);
}
