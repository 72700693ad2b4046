import { printable, type FuzzCase, type ServiceName } from './fuzz-case';
import { Deep, Ref, type JsonNode } from './hostile-json';

/**
 * A builder of requests made by hand that must be refused (placeholders as in FuzzCase), named
 * after the issue they come from and carrying `credential` (default the fuzz organization's key).
 */
export function handBuiltRefusals(issue: number, credential = '{orgKey}') {
  return (
    service: ServiceName,
    name: string,
    method: string,
    target: string,
    body: JsonNode | Uint8Array | null,
    extraHeaders: Array<[string, string]> = [],
  ): FuzzCase =>
    printable({
      service,
      endpoint: `issue ${issue}: ${name}`,
      mutations: [name],
      method,
      target,
      headers: [
        ['Authorization', `Bearer ${credential}`],
        ...(body !== null ? ([['Content-Type', 'application/json']] as Array<[string, string]>) : []),
        ['Connection', 'close'],
        ...extraHeaders,
      ],
      body,
      framing: body === null ? { kind: 'none' } : { kind: 'length' },
      head: { version: 'HTTP/1.1', lineEnd: '\r\n', host: 'normal' },
      pick: 0,
      mustRefuse: true,
    });
}

const request = handBuiltRefusals(10);

const chat = (extra: Record<string, JsonNode>): JsonNode => ({
  model: 'tollway/sim-chat',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

/**
 * The reproductions issue 10 opens with, each of which once crashed a service, exhausted its
 * memory or answered 500. Every one must now be refused with a 4xx while both services keep serving.
 */
export const ISSUE_REPRODUCTIONS: FuzzCase[] = [
  request('sessions', 'webhook token with a character no header may hold', 'POST', '/sessions/{sessionId}/messages', {
    content: 'hi',
    webhook: { url: 'http://127.0.0.1:9/hook', token: 'secret€' },
  }),
  request('sessions', 'webhook token with a control character', 'POST', '/sessions/{sessionId}/messages', {
    content: 'hi',
    webhook: { url: new Ref('webhookUrl'), token: 'a\r\nX-Injected: 1' },
  }),
  request('gateway', 'n = 100000000', 'POST', '/v1/chat/completions', chat({ n: 100_000_000 })),
  request(
    'gateway',
    'n = 2147483648 on a stream',
    'POST',
    '/v1/chat/completions',
    chat({ n: 2_147_483_648, stream: true }),
  ),
  request('gateway', 'malformed percent-encoding: /v1/models/%', 'GET', '/v1/models/%', null),
  request('gateway', 'malformed percent-encoding: /v1/models/%zz', 'GET', '/v1/models/%zz', null),
  request('sessions', 'malformed percent-encoding: /sessions/%', 'GET', '/sessions/%', null),
  request('sessions', 'user_params nested 10000 deep', 'POST', '/sessions/{sessionId}/messages', {
    content: 'hi',
    user_params: { deep: new Deep(10_000, 'object') },
  }),
  request(
    'gateway',
    'Content-Encoding gzip on a body that is not gzip',
    'POST',
    '/v1/chat/completions',
    new Uint8Array(Buffer.from('{"model":"tollway/sim-chat"}')),
    [['Content-Encoding', 'gzip']],
  ),
  request(
    'sessions',
    'Content-Encoding gzip on a body that is not gzip',
    'POST',
    '/sessions',
    new Uint8Array(Buffer.from('{}')),
    [['Content-Encoding', 'gzip']],
  ),
];
