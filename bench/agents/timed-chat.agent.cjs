// The session service's built-in chat agent (of the build named by BENCH_INNER_AGENT, a path to
// its dist/agents/chat.agent.js), with the wall-clock times the agent started and ended written on
// the last message it returns, as its `name` (`t<start ms>-<end ms>`): a benchmark reads them back
// from GET /sessions/{id}/messages to tell a turn's wait in the queue from its run. The same module
// runs on every build, so the time measured is the same thing on each.
const inner = require(process.env.BENCH_INNER_AGENT);
const agent = [inner, inner.default, inner.agent].find((candidate) => typeof candidate === 'function');

module.exports = async function timedChat(input, ctx) {
  const started = Date.now();
  const result = await agent(input, ctx);
  const last = result.messages.at(-1);
  if (last) last.name = `t${started}-${Date.now()}`;
  return result;
};
