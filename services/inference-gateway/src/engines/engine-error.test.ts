import { isUtf8 } from 'node:buffer';
import type { ServiceError } from '@tollway/service-kit';
import {
  EngineHttpError,
  engineRefusal,
  ENGINE_RETRY_AFTER_DEFAULT_MS,
  ENGINE_RETRY_AFTER_MAX_MS,
  parseRetryAfter,
  toClientEngineError,
} from './engine-error';

describe('toClientEngineError', () => {
  const answer = (status: number, type: string, body: string) =>
    toClientEngineError(new EngineHttpError(status, type, Buffer.from(body)));

  it('keeps the flat shape and text/plain bodies byte for byte', () => {
    const flat = '{"object":"error","message":"m","type":"BadRequestError","param":"n","code":400}';
    expect(answer(400, 'application/json', flat)).toEqual({
      status: 400,
      contentType: 'application/json',
      body: Buffer.from(flat),
    });
    expect(answer(400, 'text/plain', 'Inference error: x')).toEqual({
      status: 400,
      contentType: 'text/plain',
      body: Buffer.from('Inference error: x'),
    });
  });

  it('flattens the nested shape, defaulting code to the status', () => {
    const nested = answer(422, 'application/json', '{"error":{"message":"m","type":"Unprocessable","param":null}}');
    expect(nested.status).toBe(422);
    expect(JSON.parse(String(nested.body))).toEqual({
      object: 'error',
      message: 'm',
      type: 'Unprocessable',
      param: null,
      code: 422,
    });
  });

  it("names a nested error's missing type by its status: an engine's 5xx is no bad request of the client's", () => {
    const typeOf = (status: number) =>
      (
        JSON.parse(String(answer(status, 'application/json', '{"error":{"message":"CUDA out of memory"}}').body)) as {
          type: string;
        }
      ).type;
    expect([500, 503, 400, 404, 401, 418].map(typeOf)).toEqual([
      'InternalServerError',
      'InternalServerError',
      'BadRequestError',
      'NotFoundError',
      'AuthenticationError',
      'BadRequestError',
    ]);
  });

  it('maps a non-error status to 502 and leaves unparseable JSON alone', () => {
    expect(answer(302, 'application/json', '{oops').status).toBe(502);
    expect(String(answer(500, 'application/json', '{oops').body)).toBe('{oops');
  });
});

describe('engineRefusal', () => {
  const refusal = (status: number, body = '{"object":"error","message":"m","type":"T","param":null,"code":1}') =>
    engineRefusal('a/b', status, 'application/json', Buffer.from(body), null);

  it('passes 400 and 5xx on as the engine wrote them', () => {
    for (const status of [400, 500, 503]) {
      const err = refusal(status);
      expect(err).toBeInstanceOf(EngineHttpError);
      expect((err as EngineHttpError).status).toBe(status);
    }
  });

  it('makes a 422 a 400 whose JSON body has code 400, flat or nested; a text body unchanged', () => {
    const flat = refusal(422) as EngineHttpError;
    expect(flat.status).toBe(400);
    expect(JSON.parse(String(flat.body))).toEqual({ object: 'error', message: 'm', type: 'T', param: null, code: 400 });
    const nested = refusal(422, '{"error":{"message":"n","param":"top_k"}}') as EngineHttpError;
    expect(JSON.parse(String(nested.body))).toEqual({
      object: 'error',
      message: 'n',
      type: 'BadRequestError',
      param: 'top_k',
      code: 400,
    });
    const text = engineRefusal('a/b', 422, 'text/plain', Buffer.from('Inference error: x'), null) as EngineHttpError;
    expect([text.status, String(text.body)]).toEqual([400, 'Inference error: x']);
  });

  describe("puts a refusal in neither of the spec's 400 shapes in the flat one, with the engine's reason", () => {
    const flat = (status: number, contentType: string, body: string) => {
      const err = engineRefusal('a/b', status, contentType, Buffer.from(body), null) as EngineHttpError;
      expect([err.status, err.contentType]).toEqual([400, 'application/json']);
      return JSON.parse(String(err.body)) as Record<string, unknown>;
    };

    it.each([
      [
        "TGI's 400",
        400,
        '{"error":"Input validation error: `temperature` must be strictly positive","error_type":"validation"}',
        'Input validation error: `temperature` must be strictly positive',
        null,
      ],
      [
        "TGI's 422",
        422,
        '{"error":"Input validation error: top_n_tokens","error_type":"validation"}',
        'Input validation error: top_n_tokens',
        null,
      ],
      ["FastAPI's 400", 400, '{"detail":"Invalid parameter"}', 'Invalid parameter', null],
      [
        "pydantic's 422",
        422,
        '{"detail":[{"type":"less_than_equal","loc":["body","temperature"],"msg":"Input should be less than or equal to 2","input":9}]}',
        'temperature: Input should be less than or equal to 2',
        'temperature',
      ],
      ['a message field', 400, '{"message":"bad top_k"}', 'bad top_k', null],
      [
        'a flat shape without its type',
        400,
        '{"object":"error","message":"m","param":"top_k","code":400}',
        'm',
        'top_k',
      ],
      [
        'a flat shape with a string code',
        400,
        '{"object":"error","message":"m","type":"T","param":null,"code":"bad"}',
        'm',
        null,
      ],
    ])('%s', (_name, status, body, message, param) => {
      expect(flat(status, 'application/json', body)).toEqual({
        object: 'error',
        message,
        type: expect.any(String),
        param,
        code: 400,
      });
    });

    it('an HTML page of a proxy, an empty or unparseable JSON body: a message naming the status', () => {
      for (const [type, body] of [
        ['text/html', '<html><body><h1>400 Bad Request</h1></body></html>'],
        ['application/json', '{oops'],
        ['application/json', '[]'],
        ['application/json', '{}'],
      ] as const) {
        expect(flat(400, type, body)).toMatchObject({
          message: 'The engine refused the request (400) without a readable reason.',
          type: 'BadRequestError',
          code: 400,
        });
      }
    });

    it('a flat shape with bytes that are not UTF-8: the message in UTF-8', () => {
      const body = Buffer.concat([
        Buffer.from('{"object":"error","message":"bad '),
        Buffer.from([0xff]),
        Buffer.from('","type":"T","param":null,"code":400}'),
      ]);
      const err = engineRefusal('a/b', 400, 'application/json', body, null) as EngineHttpError;
      expect(isUtf8(err.body)).toBe(true);
      expect(JSON.parse(String(err.body))).toEqual({
        object: 'error',
        message: 'bad \uFFFD',
        type: 'T',
        param: null,
        code: 400,
      });
    });

    it('cuts a long message', () => {
      expect(String(flat(400, 'application/json', JSON.stringify({ error: 'x'.repeat(5000) })).message)).toHaveLength(
        2001,
      );
    });
  });

  it('makes a 429 a provider_overloaded with the wait asked, the default, or the cap', () => {
    const asked = engineRefusal('a/b', 429, 'application/json', Buffer.from('{}'), 2500) as ServiceError;
    expect(asked).toMatchObject({ status: 429, code: 'provider_overloaded' });
    expect(asked.headers).toMatchObject({ 'retry-after-ms': '2500', 'retry-after': '3', 'x-should-retry': 'true' });
    expect((refusal(429) as ServiceError).headers['retry-after-ms']).toBe(String(ENGINE_RETRY_AFTER_DEFAULT_MS));
    const long = engineRefusal('a/b', 429, 'application/json', Buffer.from('{}'), 3_600_000) as ServiceError;
    expect(long.headers['retry-after-ms']).toBe(String(ENGINE_RETRY_AFTER_MAX_MS));
  });

  it('makes a 413 a 400 request_too_large and every other status a 502 engine_refused', () => {
    expect(refusal(413)).toMatchObject({ status: 400, code: 'request_too_large' });
    for (const status of [401, 402, 403, 404, 405, 408, 409, 418])
      expect(refusal(status)).toMatchObject({ status: 502, type: 'server_error', code: 'engine_refused' });
  });
});

describe('parseRetryAfter', () => {
  it('reads retry-after-ms first, then retry-after in seconds or as an HTTP date', () => {
    expect(parseRetryAfter('250', '9')).toBe(250);
    expect(parseRetryAfter('12.5', null)).toBe(13);
    expect(parseRetryAfter(null, '3')).toBe(3000);
    expect(parseRetryAfter('soon', '3')).toBe(3000);
    const now = Date.parse('2026-11-25T10:00:00Z');
    expect(parseRetryAfter(null, 'Wed, 25 Nov 2026 10:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter(null, 'Wed, 25 Nov 2026 09:59:00 GMT', now)).toBe(0);
  });

  it('is null when there is nothing it can read', () => {
    expect(parseRetryAfter(null, null)).toBeNull();
    expect(parseRetryAfter(null, 'later')).toBeNull();
    expect(parseRetryAfter('-5', '-5')).toBeNull();
  });
});
