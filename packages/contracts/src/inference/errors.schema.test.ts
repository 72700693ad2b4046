import { issuePaths } from '../__fixtures__/issues';
import { BUDGET_KINDS, BudgetKind, EngineErrorResponse, ErrorResponse, INFERENCE_ERROR_CODES } from './errors.schema';

const envelope = (error: Record<string, unknown>) => ({ error });

describe('ErrorResponse (the service envelope)', () => {
  it.each([
    ['every code of the Errors table', Object.values(INFERENCE_ERROR_CODES).map((code) => ({ code }))],
    ['a 401 without a code field', [{}]],
    ['a null code and param', [{ code: null, param: null }]],
    ['a 429 naming the budget in type', BUDGET_KINDS.map((type) => ({ type, code: 'rate_limit_exceeded' }))],
  ])('accepts %s', (_name, variants) => {
    for (const variant of variants) {
      expect(issuePaths(ErrorResponse, envelope({ message: 'm', type: 'invalid_request_error', ...variant }))).toEqual(
        [],
      );
    }
  });

  it.each([
    ['a flat body', { message: 'm', type: 't' }, 'error'],
    ['message missing', envelope({ type: 't' }), 'error.message'],
    ['type missing', envelope({ message: 'm' }), 'error.type'],
    ['an integer code', envelope({ message: 'm', type: 't', code: 400 }), 'error.code'],
    ['param a number', envelope({ message: 'm', type: 't', param: 1 }), 'error.param'],
  ])('refuses %s at its path', (_name, body, path) => {
    expect(issuePaths(ErrorResponse, body)).toEqual([path]);
  });

  it('exports the budget kinds as an enumeration', () => {
    expect(BudgetKind.options).toEqual(['requests', 'input_tokens', 'output_tokens']);
    expect(issuePaths(BudgetKind, 'tokens')).toEqual(['']);
  });
});

describe('EngineErrorResponse (flat engine passthrough)', () => {
  const flat = {
    object: 'error',
    message: 'top_p must be in (0, 1]',
    type: 'BadRequestError',
    param: 'top_p',
    code: 400,
  };

  it.each([
    ['the vLLM shape', flat],
    ['the older "Bad Request" type', { ...flat, type: 'Bad Request' }],
    ['a null param', { ...flat, param: null }],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(EngineErrorResponse, body)).toEqual([]);
  });

  it.each([
    ['a string code', { ...flat, code: '400' }, 'code'],
    ['code missing', { ...flat, code: undefined }, 'code'],
    ['a wrong object', { ...flat, object: 'err' }, 'object'],
    ['type missing', { ...flat, type: undefined }, 'type'],
    ['the nested shape', { error: flat }, 'object'],
  ])('refuses %s at its path', (_name, body, path) => {
    expect(issuePaths(EngineErrorResponse, JSON.parse(JSON.stringify(body)))[0]).toBe(path);
  });
});
