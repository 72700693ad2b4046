/**
 * The example agent's tool: evaluates an arithmetic expression (numbers, + − × ÷, %, ^, parentheses,
 * unary minus) with a small recursive-descent parser, never `eval`.
 */

/** The tool's definition as sent to the model in `tools`. */
export const CALCULATOR_TOOL = {
  type: 'function',
  function: {
    name: 'calculator',
    description: 'Evaluates an arithmetic expression such as "(2 + 3) * 4 / 5" and returns the number.',
    parameters: {
      type: 'object',
      properties: { expression: { type: 'string', description: 'the arithmetic expression' } },
      required: ['expression'],
    },
  },
} as const;

/** Evaluates `expression`; throws an Error describing the first problem. */
export function evaluateExpression(expression: string): number {
  const tokens = expression.match(/\d+(?:\.\d+)?(?:e[+-]?\d+)?|[-+*/%^()]|\S/gi) ?? [];
  let pos = 0;
  const peek = () => tokens[pos];
  const take = () => tokens[pos++];

  const primary = (): number => {
    const token = take();
    if (token === undefined) throw new Error('unexpected end of expression');
    if (token === '(') {
      const value = sum();
      if (take() !== ')') throw new Error('missing ")"');
      return value;
    }
    if (token === '-') return -power();
    if (token === '+') return power();
    const value = Number(token);
    if (!Number.isFinite(value)) throw new Error(`unexpected "${token}"`);
    return value;
  };
  const power = (): number => {
    const base = primary();
    if (peek() === '^') {
      take();
      return base ** power();
    }
    return base;
  };
  const product = (): number => {
    let value = power();
    for (let op = peek(); op === '*' || op === '/' || op === '%'; op = peek()) {
      take();
      const right = power();
      value = op === '*' ? value * right : op === '/' ? value / right : value % right;
    }
    return value;
  };
  const sum = (): number => {
    let value = product();
    for (let op = peek(); op === '+' || op === '-'; op = peek()) {
      take();
      const right = product();
      value = op === '+' ? value + right : value - right;
    }
    return value;
  };

  const result = sum();
  if (pos !== tokens.length) throw new Error(`unexpected "${tokens[pos]}"`);
  if (!Number.isFinite(result)) throw new Error('the result is not a finite number');
  return result;
}

/** Runs one `calculator` tool call's JSON arguments; the tool result text (a number or an error). */
export function runCalculator(argumentsJson: string): string {
  try {
    const args = JSON.parse(argumentsJson) as { expression?: unknown };
    if (typeof args.expression !== 'string') return 'error: "expression" must be a string';
    return String(evaluateExpression(args.expression));
  } catch (err) {
    return `error: ${err instanceof Error ? err.message : String(err)}`;
  }
}
