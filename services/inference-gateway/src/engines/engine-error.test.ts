import { EngineHttpError, toClientEngineError } from './engine-error';

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

  it('maps a non-error status to 502 and leaves unparseable JSON alone', () => {
    expect(answer(302, 'application/json', '{oops').status).toBe(502);
    expect(String(answer(400, 'application/json', '{oops').body)).toBe('{oops');
  });
});
