#!/usr/bin/env node
// The failover drill at full length (scripts/failover-drill.ts; the CI test runs it short): the
// whole platform through Sentinel (a primary, two replicas, three sentinels), two gateways, a
// session API and a worker, under chat and turn load; a planned switchover, then kill -9 of the
// primary. Prints, per event and round: the time until both services answer again (goal < 10 s),
// what clients saw meanwhile (503s, their retry advice, hangs), acknowledged writes lost; over the
// rounds: turns accepted, lost and stuck (goal 0), and the chat organization's budget overshoot
// against its documented bound.
// Usage: node --conditions=@tollway/source --import tsx bench/failover-drill.mjs
//          [--rounds 1] [--seconds 5] [--chat-clients 8] [--session-clients 4] [--budget 600] [--dist]
//   --seconds  load before each event, and after both services answer again
//   --dist     runs the compiled services (pnpm build first) instead of the TypeScript sources
import { benchArgs } from './lib/args.mjs';
import { runFailoverDrill } from '../scripts/failover-drill.ts';

const options = benchArgs(
  'node --conditions=@tollway/source --import tsx bench/failover-drill.mjs [--rounds 1] [--seconds 5] [--chat-clients 8] [--session-clients 4] [--budget 600] [--dist]',
  { numbers: { rounds: 1, seconds: 5, 'chat-clients': 8, 'session-clients': 4, budget: 600 }, flags: ['dist'] },
);

const ms = (value) => (Number.isFinite(value) ? `${(value / 1000).toFixed(1)} s` : 'never');
const failures = (counts) =>
  Object.entries(counts)
    .map(([status, n]) => `${n}×${status === '0' ? 'no answer' : status}`)
    .join(', ') || 'none';

const totals = { accepted: 0, completed: 0, errored: 0, lost: 0, stuck: 0 };
for (let round = 1; round <= options.rounds; round++) {
  const figures = await runFailoverDrill({
    chatClients: options['chat-clients'],
    sessionClients: options['session-clients'],
    settleMs: options.seconds * 1000,
    afterMs: options.seconds * 1000,
    budgetRequests: options.budget,
    entry: options.dist ? 'dist' : 'source',
    log: (line) => console.log(`  ${line}`),
  });
  console.log(`round ${round} (${ms(figures.durationMs)}):`);
  for (const [name, phase] of [
    ['switchover (CLIENT PAUSE WRITE, SENTINEL FAILOVER, REPLICAOF)', figures.switchover],
    ['kill -9 of the primary', figures.kill],
  ]) {
    console.log(`  ${name}:`);
    console.log(
      `    new primary named by the sentinels after ${ms(phase.promotedAfterMs)}, with a replica after ${ms(phase.replicatedAfterMs)}`,
    );
    console.log(
      `    answers succeed again after: chat ${ms(phase.recoveredAfterMs.chat)}, sessions ${ms(phase.recoveredAfterMs.sessions)}`,
    );
    console.log(
      `    ${phase.answers} answers; failures: ${failures(phase.failures)}; without retry-after: ${phase.withoutRetryAfter}; other than 503/429: ${phase.unclear}`,
    );
    console.log(`    slowest failure ${phase.slowestFailureMs.toFixed(0)} ms; hangs (> 5 s): ${phase.hangs}`);
    console.log(
      `    acknowledged writes lost (a plain INCR-like probe every 2 ms, no WAIT): ${phase.lostWrites}${phase.lostWrites ? ` over ${phase.lostWindowMs.toFixed(0)} ms` : ''}`,
    );
  }
  const { turns, budget } = figures;
  console.log(
    `  turns: ${turns.accepted} accepted (202): ${turns.completed} completed, ${turns.errored} ended in error, ${turns.lost} lost, ${turns.stuck} stuck`,
  );
  console.log(
    `  budget: ${budget.admitted} admitted of ${budget.allowed} allowed (${budget.budget}/min and its refill); overshoot ${budget.overshoot}, bound ${budget.bound}`,
  );
  for (const key of Object.keys(totals)) totals[key] += turns[key];
}
if (options.rounds > 1) {
  console.log(
    `all rounds: ${totals.accepted} turns accepted, ${totals.completed} completed, ${totals.errored} in error, ${totals.lost} lost, ${totals.stuck} stuck`,
  );
}
process.exit(totals.lost === 0 && totals.stuck === 0 ? 0 : 1);
