import { issuePaths, withFields } from '../__fixtures__/issues';
import { AgentTurnJob } from './agent-turn.job';

const job = {
  session_id: '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11',
  turn_id: 'turn-1',
  org_id: null,
  message: { content: 'Hi' },
  accepted_at: 1789000000000,
};

describe('AgentTurnJob', () => {
  it('accepts a job and fills the message defaults', () => {
    expect(AgentTurnJob.parse(job).message).toEqual({ content: 'Hi', role: 'user', user_params: null, webhook: null });
    expect(issuePaths(AgentTurnJob, { ...job, org_id: 'org_1' })).toEqual([]);
  });

  it.each([
    ['a session_id that is not a UUID', { session_id: 'abc' }, 'session_id'],
    ['an empty turn_id', { turn_id: '' }, 'turn_id'],
    ['org_id missing (null without auth)', { org_id: undefined }, 'org_id'],
    ['a bad message role', { message: { role: 'robot' } }, 'message.role'],
    ['fractional accepted_at', { accepted_at: 1.5 }, 'accepted_at'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(AgentTurnJob, withFields(job, patch))).toEqual([path]);
  });
});
