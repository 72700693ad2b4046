import type { FuzzCase } from './fuzz-case';
import type { Outcome } from './raw-http';

/** For the unit tests of the oracles: a valid chat completion case, as the generators would make it. */
export const CHAT_CASE: FuzzCase = {
  service: 'gateway',
  endpoint: 'POST /v1/chat/completions (JSON)',
  mutations: [],
  method: 'POST',
  target: '/v1/chat/completions',
  headers: [],
  body: {},
  framing: { kind: 'length' },
  head: { version: 'HTTP/1.1', lineEnd: '\r\n', host: 'normal' },
  pick: 0,
  mustRefuse: false,
};

/** A complete answer: `body` (JSON unless a string) under `contentType`; `bodyBytes` when only part was kept. */
export function answerOf(status: number, body: unknown, contentType = 'application/json', bodyBytes?: number): Outcome {
  const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return {
    kind: 'response',
    status,
    headers: { 'content-type': contentType },
    body: bytes,
    bodyBytes: bodyBytes ?? bytes.length,
    ms: 1,
  };
}
