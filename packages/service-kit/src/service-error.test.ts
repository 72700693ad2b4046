import { formatIssuePath, ServiceError } from './service-error';

describe('ServiceError', () => {
  it('defaults type to invalid_request_error and param to null', () => {
    const err = new ServiceError({ status: 404, code: 'model_not_found', message: 'The model `a/b` does not exist.' });
    expect(err).toBeInstanceOf(Error);
    expect(err.status).toBe(404);
    expect(err.toBody()).toEqual({
      error: {
        message: 'The model `a/b` does not exist.',
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      },
    });
  });

  it('leaves code out entirely when it was never set (the 401 rule)', () => {
    const body = new ServiceError({ status: 401, message: 'Invalid API key.' }).toBody();
    expect(body.error).not.toHaveProperty('code');
    expect(Object.keys(body.error)).toEqual(['message', 'type', 'param']);
  });

  it('keeps an explicit null code', () => {
    expect(new ServiceError({ status: 400, message: 'm', code: null }).toBody().error.code).toBeNull();
  });

  it('carries type, param, headers and cause', () => {
    const cause = new Error('upstream');
    const err = new ServiceError({
      status: 429,
      type: 'input_tokens',
      code: 'rate_limit_exceeded',
      param: 'messages',
      headers: { 'retry-after': '1' },
      message: 'Budget empty.',
      cause,
    });
    expect(err.toBody().error).toEqual({
      message: 'Budget empty.',
      type: 'input_tokens',
      param: 'messages',
      code: 'rate_limit_exceeded',
    });
    expect(err.headers).toEqual({ 'retry-after': '1' });
    expect(err.cause).toBe(cause);
  });
});

describe('formatIssuePath', () => {
  it.each([
    [[], null],
    [['model'], 'model'],
    [['messages', 0, 'role'], 'messages[0].role'],
    [['stream_options', 'include_usage'], 'stream_options.include_usage'],
    [['logit_bias', '50256'], 'logit_bias.50256'],
    [[0, 'content'], '[0].content'],
  ])('%p → %p', (path, param) => {
    expect(formatIssuePath(path)).toBe(param);
  });
});
