import express from 'express';
import request from 'supertest';
import { REQUEST_ID_HEADER, requestId } from './request-id';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('requestId', () => {
  const app = express();
  app.use(requestId());
  app.get('/', (req, res) => {
    res.json({ id: req.id });
  });

  it('echoes a sane client id on req.id and the response', async () => {
    const res = await request(app).get('/').set(REQUEST_ID_HEADER, 'abc-123.def:4_5').expect(200);
    expect(res.body.id).toBe('abc-123.def:4_5');
    expect(res.headers[REQUEST_ID_HEADER]).toBe('abc-123.def:4_5');
  });

  it('assigns a UUID when the client sends none', async () => {
    const res = await request(app).get('/').expect(200);
    expect(res.body.id).toMatch(UUID);
    expect(res.headers[REQUEST_ID_HEADER]).toBe(res.body.id);
  });

  it.each([
    ['too long', 'a'.repeat(129)],
    ['with blanks', 'a b'],
    ['with markup', '<script>'],
    ['with a newline-like escape', 'a\\nb'],
  ])('replaces an id that is %s', async (_name, incoming) => {
    const res = await request(app).get('/').set(REQUEST_ID_HEADER, incoming).expect(200);
    expect(res.body.id).toMatch(UUID);
  });

  it('gives two requests different ids', async () => {
    const [a, b] = await Promise.all([request(app).get('/'), request(app).get('/')]);
    expect(a.body.id).not.toBe(b.body.id);
  });
});
