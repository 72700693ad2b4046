import { issuePaths, withFields } from '../__fixtures__/issues';
import { TraceMetrics, WebhookPayload, WebhookSpec } from './webhook.schema';

const trace = { trace_id: null, total_duration: 1.25, total_tokens: 42, has_error: false };
const success = {
  session_id: '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11',
  status: 'idle',
  response: { role: 'assistant', content: 'Done' },
  error: null,
  messages: null,
  trace_metrics: null,
};

describe('WebhookSpec', () => {
  it.each([
    ['http', 'http://localhost:3000/hook'],
    ['https', 'https://hooks.example.test/a?b=c'],
  ])('accepts an %s url', (_name, url) => {
    expect(issuePaths(WebhookSpec, { url })).toEqual([]);
  });

  it.each(['javascript:alert(1)', 'file:///etc/passwd', 'example.test/hook', ''])('refuses url %p', (url) => {
    expect(issuePaths(WebhookSpec, { url })).toEqual(['url']);
  });
});

describe('TraceMetrics', () => {
  it('accepts a trace with and without an id', () => {
    expect(issuePaths(TraceMetrics, trace)).toEqual([]);
    expect(issuePaths(TraceMetrics, { ...trace, trace_id: 'abc', has_error: true })).toEqual([]);
  });

  it.each([
    ['trace_id missing (required, nullable)', { trace_id: undefined }, 'trace_id'],
    ['fractional total_tokens', { total_tokens: 1.5 }, 'total_tokens'],
    ['total_duration as a string', { total_duration: '1s' }, 'total_duration'],
    ['has_error as a string', { has_error: 'no' }, 'has_error'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(TraceMetrics, withFields(trace, patch))).toEqual([path]);
  });
});

describe('WebhookPayload', () => {
  it.each([
    ['a success', success],
    ['a failure', { ...success, status: 'error', response: null, error: 'agent failed' }],
    [
      'a success with messages and trace metrics',
      {
        ...success,
        messages: [
          { role: 'user', content: 'Go' },
          { role: 'assistant', content: 'Done' },
        ],
        trace_metrics: trace,
      },
    ],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(WebhookPayload, body)).toEqual([]);
  });

  it.each([
    ['status running (only idle or error are delivered)', { status: 'running' }, 'status'],
    ['messages missing (null when not requested)', { messages: undefined }, 'messages'],
    ['trace_metrics missing', { trace_metrics: undefined }, 'trace_metrics'],
    ['a message with an unknown role', { messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role'],
    ['bad trace metrics', { trace_metrics: { ...trace, has_error: 1 } }, 'trace_metrics.has_error'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(WebhookPayload, withFields(success, patch))).toEqual([path]);
  });
});
