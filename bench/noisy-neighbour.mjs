#!/usr/bin/env node
// Noisy neighbours on the session service (issue 35): organization A floods N turns while B, C and
// D send one turn each; does B wait behind A? Each build (this checkout, and `--base`, e.g. the
// build before fair scheduling) runs the same platform in turn: a private Redis, the gateway with
// its simulated engine (the default model, sim-chat), 2 session API replicas and 2 workers of 4
// agent processes, the built-in chat agent (timed: agents/timed-chat.agent.cjs marks when each
// turn's agent started and ended). Per build it prints:
//   - B alone: its round trip (send → long-poll answer), queue wait (202 → agent start) and run, p50 of --tries;
//   - A alone: N turns flooded, A's turns/s (202 of the first → callback of the last), and Redis
//     commands and CPU per turn (INFO before and after, the gateway's model calls included);
//   - A floods N again, then B sends --tries turns one after another, C and D one each: B's round
//     trip and queue wait p50 (over the tries sent while A's backlog still waited), against B alone;
//   - (builds with weights) two organizations of weight 1 and 3 flood --weighted turns each: the
//     share each got while both were backlogged.
// Then, per flood size, new ÷ base. Build both first (pnpm build here, and in the base checkout).
// Usage: node bench/noisy-neighbour.mjs [--base DIR] [--floods 400,4000] [--tries 20] [--weighted 300]
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { inParallel, perUnit, quantile, sessionClient, startSessionPlatform, until } from './lib/session-rig.mjs';

const args = benchArgs(
  'node bench/noisy-neighbour.mjs [--base DIR] [--floods 400,4000] [--tries 20] [--weighted 300] [--json FILE]',
  { numbers: { tries: 20, weighted: 300 }, strings: { base: null, floods: '400,4000', json: null } },
);
const floods = args.floods.split(',').map(Number);
const builds = { new: resolve(new URL('..', import.meta.url).pathname) };
if (args.base) builds.base = resolve(args.base);

const results = {};
for (const [name, root] of Object.entries(builds)) {
  for (const flood of floods) {
    console.error(`${name}: flood ${flood}…`);
    results[`${name}/${flood}`] = await runBuild(root, flood);
  }
}
report();

async function runBuild(root, flood) {
  const platform = await startSessionPlatform(root, { apis: 2, workers: 2, concurrency: 4 });
  try {
    const orgs = {};
    for (const org of ['a', 'b', 'c', 'd', 'w1', 'w3']) orgs[org] = await platform.organization(`org-${org}`);
    const client = Object.fromEntries(
      Object.entries(orgs).map(([org, { key }]) => [org, sessionClient(platform.apiUrls, key)]),
    );
    const weighted = await setWeights(root, platform, orgs);

    // Warm up every process (connections, JIT) with a few turns; then B alone.
    await tries(client.b, 5);
    const alone = await tries(client.b, args.tries);

    const aAlone = await floodTurns(platform, client.a, flood);

    const noisy = await floodTurns(platform, client.a, flood, async (backlogWaits) => {
      const [b, c, d] = await Promise.all([
        tries(client.b, args.tries, backlogWaits),
        tries(client.c, 1),
        tries(client.d, 1),
      ]);
      return { b, c: c.latency[0], d: d.latency[0] };
    });
    const share = weighted ? await weightedShare(platform, client.w1, client.w3, args.weighted) : null;
    for (const c of Object.values(client)) c.close();
    return {
      alone: summary(alone),
      aTurnsPerSecond: aAlone.turnsPerSecond,
      redis: aAlone.redis,
      behind: { ...summary(noisy.during.b), triesBehind: noisy.during.b.behind, c: noisy.during.c, d: noisy.during.d },
      share,
    };
  } catch (err) {
    console.error(`${root}: ${err.stack}`);
    throw err;
  } finally {
    await platform.stop();
  }
}

/** Sets the weight of w1 to 1 and of w3 to 3 in their records; false when the build has no weights. */
async function setWeights(root, platform, orgs) {
  if (!existsSync(join(root, 'services/agent-session/dist/store/turn-scheduler.js'))) return false;
  for (const [org, weight] of [
    ['w1', 1],
    ['w3', 3],
  ]) {
    await platform.redis.redis.hset(`bench:{org:${orgs[org].id}}:org`, 'turn_weight', String(weight));
  }
  return true;
}

/**
 * `n` turns of one session, one after another: round trip, queue wait and run of each try that
 * `counts()` when it is sent (all by default; behind a flood, those sent while its backlog waits).
 */
async function tries(client, n, counts = () => true) {
  const id = await client.createSession();
  const out = { latency: [], wait: [], run: [], behind: 0 };
  for (let i = 0; i < n; i++) {
    const counted = counts();
    const sentAt = Date.now();
    const acceptedAt = await client.send(id, { content: `try ${i}` });
    const doneAt = await client.waitIdle(id);
    const times = await client.lastTurnTimes(id);
    if (!counted) continue;
    out.behind++;
    out.latency.push(doneAt - sentAt);
    if (times) {
      out.wait.push(Math.max(0, times.started - acceptedAt));
      out.run.push(times.ended - times.started);
    }
  }
  return out;
}

function summary({ latency, wait, run }) {
  return { latency: quantile(latency, 0.5), wait: quantile(wait, 0.5), run: quantile(run, 0.5), n: latency.length };
}

/**
 * Floods `n` turns of `client`'s organization (sessions made first, sends 64 at a time, each asking
 * for a webhook); once every send is accepted, runs `during(backlogWaits)` if given. Resolves the
 * turns/s from the first 202 to the last callback, Redis's commands and CPU per turn from the first
 * send to the last callback (the sessions' creation left out), and what `during` returned.
 */
async function floodTurns(platform, client, n, during) {
  const ids = await inParallel(Array.from({ length: n }), 32, () => client.createSession());
  const webhook = { url: platform.hooks.url };
  const before = await platform.redis.counters();
  const startedAt = Date.now();
  await inParallel(ids, 64, (id) => client.send(id, { content: 'flood', webhook }));
  const done = () => ids.filter((id) => platform.hooks.arrived.has(id)).length;
  const backlogWaits = () => done() < n;
  const duringResult = during ? await during(backlogWaits) : null;
  await until(() => done() === n, 600_000, 100);
  const after = await platform.redis.counters();
  const lastAt = Math.max(...ids.map((id) => platform.hooks.arrived.get(id).at));
  return { turnsPerSecond: (n * 1000) / (lastAt - startedAt), redis: perUnit(before, after, n), during: duringResult };
}

/**
 * Two organizations of weight 1 and 3 flood `n` turns each, sends interleaved; the share of the
 * callbacks each got until the first of them had all its turns done (both backlogged meanwhile).
 */
async function weightedShare(platform, light, heavy, n) {
  const [lightIds, heavyIds] = await Promise.all(
    [light, heavy].map((c) => inParallel(Array.from({ length: n }), 32, () => c.createSession())),
  );
  const webhook = { url: platform.hooks.url };
  const interleaved = lightIds.flatMap((id, i) => [
    [light, id],
    [heavy, heavyIds[i]],
  ]);
  await inParallel(interleaved, 64, ([c, id]) => c.send(id, { content: 'weighted', webhook }));
  const arrivals = (ids) => ids.map((id) => platform.hooks.arrived.get(id)?.at);
  await until(() => [...lightIds, ...heavyIds].every((id) => platform.hooks.arrived.has(id)), 600_000, 100);
  const end = Math.min(Math.max(...arrivals(lightIds)), Math.max(...arrivals(heavyIds)));
  const lightDone = arrivals(lightIds).filter((at) => at <= end).length;
  const heavyDone = arrivals(heavyIds).filter((at) => at <= end).length;
  return { light: lightDone, heavy: heavyDone, ratio: heavyDone / lightDone };
}

function report() {
  const ms = (value) => (Number.isFinite(value) ? `${Math.round(value)}` : 'n/a');
  const lines = [
    '| build / flood | B alone: round trip, wait, run (ms) | B behind A: round trip (× alone), wait (ms) [tries] | C, D (ms) | A alone turns/s | Redis per turn | weights 1 : 3 |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const [key, r] of Object.entries(results)) {
    lines.push(
      `| ${key} | ${ms(r.alone.latency)}, ${ms(r.alone.wait)}, ${ms(r.alone.run)} | ${ms(r.behind.latency)} (${(r.behind.latency / r.alone.latency).toFixed(1)}×), ${ms(r.behind.wait)} [${r.behind.triesBehind}] | ${ms(r.behind.c)}, ${ms(r.behind.d)} | ${r.aTurnsPerSecond.toFixed(1)} | ${r.redis.commands.toFixed(1)} commands, ${ms(r.redis.cpuUs)} µs CPU | ${r.share ? `${r.share.light} : ${r.share.heavy} (1 : ${r.share.ratio.toFixed(2)})` : 'n/a'} |`,
    );
  }
  console.log(lines.join('\n'));
  for (const flood of floods) {
    const fresh = results[`new/${flood}`];
    const base = results[`base/${flood}`];
    console.log(
      `flood ${flood}: B's queue wait behind A p50 ${ms(fresh.behind.wait)} ms against one turn's run p50 ${ms(fresh.alone.run)} ms; ` +
        `B's round trip ${(fresh.behind.latency / fresh.alone.latency).toFixed(1)}× alone`,
    );
    if (base) {
      console.log(
        `flood ${flood}: A alone turns/s new ÷ base = ${(fresh.aTurnsPerSecond / base.aTurnsPerSecond).toFixed(3)}; ` +
          `Redis per turn new ${fresh.redis.commands.toFixed(1)} commands, ${ms(fresh.redis.cpuUs)} µs, base ${base.redis.commands.toFixed(1)} commands, ${ms(base.redis.cpuUs)} µs`,
      );
    }
  }
  if (args.json) writeFileSync(args.json, JSON.stringify(results, null, 2));
}
