import express from 'express';
import request from 'supertest';
import { errorMiddleware, fromBodyParserError, notFoundHandler, serializeError } from './error-middleware';
import { createLogger } from './logger';
import { requestId } from './request-id';
import { ServiceError } from './service-error';

function buildApp(logger = createLogger({ service: 'test', silent: true })) {
  const app = express();
  app.use(requestId());
  app.use(express.json({ limit: 64 }));
  app.post('/echo', (req, res) => {
    res.json(req.body);
  });
  app.get('/refuse', () => {
    throw new ServiceError({
      status: 429,
      type: 'requests',
      code: 'rate_limit_exceeded',
      message: 'Budget empty.',
      headers: { 'retry-after': '2', 'x-should-retry': 'true' },
    });
  });
  app.get('/unauthorized', () => {
    throw new ServiceError({ status: 401, message: 'Invalid API key provided.' });
  });
  app.get('/crash', () => {
    throw new Error('secret internals tw-abc123');
  });
  app.get('/async-crash', async () => {
    await Promise.resolve();
    throw new TypeError('boom');
  });
  app.get('/late', (_req, res, next) => {
    res.status(200).write('partial');
    next(new Error('after headers'));
  });
  app.use(
    notFoundHandler((path) => new ServiceError({ status: 404, code: 'not_found', message: `No route for ${path}.` })),
  );
  app.use(errorMiddleware(logger));
  return app;
}

describe('errorMiddleware', () => {
  const app = buildApp();

  it('writes a ServiceError as the envelope with its status and headers', async () => {
    const res = await request(app).get('/refuse').expect(429);
    expect(res.body).toEqual({
      error: { message: 'Budget empty.', type: 'requests', param: null, code: 'rate_limit_exceeded' },
    });
    expect(res.headers['retry-after']).toBe('2');
    expect(res.headers['x-should-retry']).toBe('true');
    expect(res.headers['x-request-id']).toBeDefined();
  });

  it('writes a 401 without a code field', async () => {
    const res = await request(app).get('/unauthorized').expect(401);
    expect(res.body.error).not.toHaveProperty('code');
  });

  it('maps broken JSON to 400 invalid_json', async () => {
    const res = await request(app).post('/echo').set('content-type', 'application/json').send('{"model":').expect(400);
    expect(res.body.error).toEqual(expect.objectContaining({ code: 'invalid_json', type: 'invalid_request_error' }));
  });

  it('maps a body over the limit to 400 request_too_large', async () => {
    const res = await request(app)
      .post('/echo')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ text: 'x'.repeat(200) }))
      .expect(400);
    expect(res.body.error.code).toBe('request_too_large');
    expect(res.body.error.message).toContain('64');
  });

  it('still passes a good body through', async () => {
    await request(app).post('/echo').send({ a: 1 }).expect(200, { a: 1 });
  });

  it('turns an unknown error into a 500 that leaks nothing, and logs it', async () => {
    const records: Array<Record<string, unknown>> = [];
    const logger = createLogger({ service: 'test', silent: true });
    logger.error = ((message: string, meta: Record<string, unknown>) => {
      records.push({ message, ...meta });
      return logger;
    }) as typeof logger.error;
    const res = await request(buildApp(logger)).get('/crash').set('x-request-id', 'req-1').expect(500);
    expect(res.body).toEqual({
      error: {
        message: 'The server failed to handle the request.',
        type: 'server_error',
        param: null,
        code: 'internal_error',
      },
    });
    expect(JSON.stringify(res.body)).not.toContain('tw-abc123');
    expect(records).toEqual([
      expect.objectContaining({ message: 'unhandled error', request_id: 'req-1', path: '/crash' }),
    ]);
  });

  it('catches rejected async handlers (express 5)', async () => {
    const res = await request(app).get('/async-crash').expect(500);
    expect(res.body.error.code).toBe('internal_error');
  });

  it('ends a response whose headers are already sent instead of writing a second status', async () => {
    await expect(request(app).get('/late')).rejects.toThrow();
  });

  it('answers unmatched paths through notFoundHandler', async () => {
    const res = await request(app).get('/nope').expect(404);
    expect(res.body.error).toEqual(expect.objectContaining({ code: 'not_found', message: 'No route for /nope.' }));
  });

  it('honours custom body codes and a custom too-large status', async () => {
    const custom = express();
    custom.use(express.json({ limit: 8 }));
    custom.post('/', (_req, res) => res.end());
    custom.use(
      errorMiddleware(createLogger({ service: 't', silent: true }), {
        invalidJson: 'bad_json',
        tooLarge: 'too_big',
        tooLargeStatus: 413,
      }),
    );
    expect(
      (await request(custom).post('/').set('content-type', 'application/json').send('{').expect(400)).body.error.code,
    ).toBe('bad_json');
    const big = await request(custom).post('/').send({ long: 'xxxxxxxxxxxxxxxx' }).expect(413);
    expect(big.body.error.code).toBe('too_big');
  });
});

describe('fromBodyParserError', () => {
  it.each([
    ['entity.parse.failed', 400, 'invalid_json'],
    ['entity.too.large', 400, 'request_too_large'],
    ['encoding.unsupported', 400, 'invalid_json'],
    ['charset.unsupported', 400, 'invalid_json'],
    ['request.aborted', 400, 'invalid_json'],
  ])('maps %s to %p %s', (type, status, code) => {
    const err = fromBodyParserError({ type });
    expect(err).toBeInstanceOf(ServiceError);
    expect([err?.status, err?.code]).toEqual([status, code]);
  });

  it('returns null for anything else', () => {
    expect(fromBodyParserError(new Error('x'))).toBeNull();
    expect(fromBodyParserError(undefined)).toBeNull();
  });
});

describe('serializeError', () => {
  it('keeps name, message and stack only', () => {
    const err = Object.assign(new Error('m'), { config: { headers: { authorization: 'Bearer tw-x' } } });
    expect(Object.keys(serializeError(err))).toEqual(['name', 'message', 'stack']);
    expect(serializeError('plain')).toEqual({ value: 'plain' });
  });
});
