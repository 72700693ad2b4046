import { handBuiltRefusals } from './issue-reproductions';
import type { FuzzCase } from './fuzz-case';
import { Deep, Entries, RawToken, Repeat, type JsonNode } from './hostile-json';

const VICTIM = '/admin/v1/organizations/{victimOrgId}';
const budgets = { requests: 1, input_tokens: 1, output_tokens: 1 };

const operator = handBuiltRefusals(35, '{adminToken}');

/** An operator's update of the victim's session limits to `limits`, which must be refused. */
const update = (name: string, limits: JsonNode): FuzzCase =>
  operator('gateway', name, 'PATCH', VICTIM, { session_limits: limits });

/** An operator's create with session limits `limits`, which must be refused (and make nothing). */
const create = (name: string, limits: JsonNode): FuzzCase =>
  operator('gateway', `create: ${name}`, 'POST', '/admin/v1/organizations', {
    name: 'Refused limits',
    budgets,
    session_limits: limits,
  });

/**
 * Session limits (issue 35) that the admin API must refuse with a 400 and change nothing for:
 * wrong types, numbers past their bounds or past what a double holds, tokens JSON does not have,
 * nesting and size far past the body's limits, keys that are not limits.
 */
export const SESSION_LIMIT_REFUSALS: FuzzCase[] = [
  update('weight as a string', { weight: '3' }),
  update('weight true', { weight: true }),
  update('weight 1001', { weight: 1001 }),
  update('weight 0', { weight: 0 }),
  update('weight -0', { weight: new RawToken('-0') }),
  update('weight 1.5', { weight: 1.5 }),
  update('weight 1e309', { weight: new RawToken('1e309') }),
  update('weight NaN', { weight: new RawToken('NaN') }),
  update('sessions 2^53 + 1', { sessions: new RawToken('9007199254740993') }),
  update('sessions 1e308', { sessions: 1e308 }),
  update('running_turns 1000001', { running_turns: 1_000_001 }),
  update('waiting_turns 1000000001', { waiting_turns: 1_000_000_001 }),
  update('waiting_turns as an array', { waiting_turns: [5] }),
  update('weight as an object', { weight: { value: 3 } }),
  update('weight nested 10000 deep', { weight: new Deep(10_000, 'object') }),
  update('session_limits nested 10000 deep', new Deep(10_000, 'array')),
  update('session_limits as 100000 numbers', new Repeat(1, 100_000)),
  update('session_limits as a string', 'default'),
  update('session_limits null', null),
  update('a limit by its storage name', { turn_weight: 3 }),
  update('a limit key of 100000 characters', new Entries([['w'.repeat(100_000), 3]])),
  update(
    'weight given twice, last a string',
    new Entries([
      ['weight', 3],
      ['weight', 'x'],
    ]),
  ),
  update('__proto__ holding a limit', new Entries([['__proto__', { weight: 3 }]])),
  update('weight as a number of 4096 digits', { weight: new RawToken('9'.repeat(4096)) }),
  create('running_turns 0', { running_turns: 0 }),
  create('sessions 1e9 + 1', { sessions: 1_000_000_001 }),
  create('weight nested 10000 deep', { weight: new Deep(10_000, 'array') }),
];
