import { evaluateExpression, runCalculator } from './calculator-tool';

it.each([
  ['1 + 2 * 3', 7],
  ['(1 + 2) * 3', 9],
  ['-2 ^ 2', -4],
  ['2 ^ 3 ^ 2', 512],
  ['10 / 4', 2.5],
  ['7 % 3', 1],
  ['1.5e2 - 50', 100],
])('evaluates %s', (expression, value) => {
  expect(evaluateExpression(expression)).toBe(value);
});

it.each(['', '1 +', '(1', '1 1', 'process.exit()', '1 / 0'])('rejects %j', (expression) => {
  expect(() => evaluateExpression(expression)).toThrow();
});

it('answers tool calls with the number or an error text', () => {
  expect(runCalculator('{"expression":"6*7"}')).toBe('42');
  expect(runCalculator('{"expr":"6*7"}')).toBe('error: "expression" must be a string');
  expect(runCalculator('not json')).toMatch(/^error: /);
});
