/**
 * The failover drill: the whole platform on a Redis that Sentinel watches, under load, while the
 * sentinels switch the primary over (no kill), then while the primary is killed with SIGKILL. It
 * measures what clients saw (time until answers succeed again, 503s and their retry advice,
 * hangs), what the failovers lost (the replication gap, read from a counter written throughout;
 * the chat organization's budget overshoot against its documented bound) and whether every
 * accepted turn ended (none lost, none stuck). `scripts/failover-drill.test.ts` runs it short
 * and asserts; `bench/failover-drill.mjs` runs it longer and prints the figures.
 *
 * Everything runs on loopback: a primary, two replicas and three `redis-sentinel` processes
 * (an ACL user on the data nodes, a password on the sentinels), two gateway replicas, a session
 * API and a worker (the default chat agent, calling the gateway), each a process of its own,
 * started from the sources (or `dist/` with `entry: 'dist'`); the organizations are made with the
 * `tollway` CLI, also through Sentinel.
 */
import type { Redis } from 'ioredis';
// The workspace root has no dependency on the packages: they are taken from their sources.
import { createRedis } from '../packages/service-kit/src/redis';
import { startRedisSentinelGroup, type RedisSentinelGroup } from '../packages/service-kit/src/testing/redis-sentinels';
import { httpJson, runCli, SIM_MODEL, sleep, startPlatform, type Entry, type Platform } from './platform-processes';

const PREFIX = 'drill:';
/** An answer slower than this is a hang (long-polls: on top of their own timeout). */
export const HANG_MS = 5_000;
/** Seconds a long-poll waits for a turn to end. */
const LONG_POLL_S = 3;

/** Options of runFailoverDrill. */
export interface DrillOptions {
  /** Concurrent chat clients, each alternating between the two gateways; default 8. */
  chatClients?: number;
  /** Concurrent session clients, each sending a message and waiting for its turn, in a loop; default 4. */
  sessionClients?: number;
  /** Load before each event (switchover, kill), ms; default 3000. */
  settleMs?: number;
  /** Load kept on after the new primary answers, ms; default 3000. */
  afterMs?: number;
  /** The chat organization's request budget per minute; default 600 (the drill's load spends it). */
  budgetRequests?: number;
  /** Run the services from their sources (tsx) or from `dist/` (after `pnpm build`); default sources. */
  entry?: Entry;
  /** Progress lines; default none. */
  log?: (line: string) => void;
}

/** One answer a client got. */
interface Answer {
  kind: 'chat' | 'send' | 'poll' | 'create';
  /** The gateway a chat request went to (its index); -1 for the session API. */
  gateway: number;
  /** performance.now() at the request and at its answer (or failure). */
  t0: number;
  t1: number;
  /** HTTP status; 0 for a request that got no answer (a reset, a timeout). */
  status: number;
  retryAfter: string | null;
}

/** What clients saw around one event (a switchover or a kill). */
export interface PhaseFigures {
  /** From the event until every sentinel names the new primary, ms. */
  promotedAfterMs: number;
  /** From the event until the new primary has a replica online (what a send's WAIT needs), ms. */
  replicatedAfterMs: number;
  /** From the event until answers succeed again (the first success after the last failure), ms, per kind and overall. */
  recoveredAfterMs: { chat: number; sessions: number; all: number };
  /** Answers from the event to the end of the phase. */
  answers: number;
  /** Failed answers by status (0 = no answer). */
  failures: Record<string, number>;
  /** 503s and 429s without `retry-after`. */
  withoutRetryAfter: number;
  /** Failures that are neither a 503 nor a 429 (a 500, a reset, a timeout): must be none. */
  unclear: number;
  /** The slowest failed answer, ms (long-polls aside: they wait on purpose). */
  slowestFailureMs: number;
  /** Answers slower than HANG_MS (long-polls: HANG_MS past their own timeout). */
  hangs: number;
  /** Writes a client had been told were done, and that the new primary does not hold. */
  lostWrites: number;
  /** The time those lost writes span, ms (0 when none was lost). */
  lostWindowMs: number;
  /**
   * The session answers of the phase, oldest first, as `<kind> <status> <ms from the event to the
   * answer>` (the last 40): what to read when the sessions did not recover.
   */
  sessionAnswers: string[];
  /** The same for the chat answers, as `<gateway>:<status> <ms from the event to the answer>`. */
  chatAnswers: string[];
}

/** Everything the drill measured. */
export interface DrillFigures {
  switchover: PhaseFigures;
  kill: PhaseFigures;
  /**
   * Accepted turns (202): completed (an answer follows the message), ended in error (none does),
   * lost (the message is not in its session's history: forgotten after its 202), and sessions
   * still running past the reaper's window (stuck).
   */
  turns: { accepted: number; completed: number; errored: number; lost: number; stuck: number };
  budget: {
    /** Requests per minute. */
    budget: number;
    /** Chat requests answered 200 over the drill. */
    admitted: number;
    /** What the budget allows over the drill: the budget plus its refill while the load ran. */
    allowed: number;
    overshoot: number;
    /** The documented bound: a quota slice per gateway per failover, plus what was admitted in each lost window. */
    bound: number;
  };
  /** How long the whole drill took, ms. */
  durationMs: number;
  /** The last lines of every service's log at the end of the load: what to read when a service did not recover. */
  logs: string;
}

/** Runs the drill; rejects (with the services' logs) when the platform cannot be set up. */
export async function runFailoverDrill(options: DrillOptions = {}): Promise<DrillFigures> {
  const log = options.log ?? (() => undefined);
  const entry = options.entry ?? 'source';
  const budget = options.budgetRequests ?? 600;
  const startedAt = performance.now();
  let platform: Platform | null = null;
  let group: RedisSentinelGroup | null = null;
  let probe: Redis | null = null;
  try {
    group = await startRedisSentinelGroup({
      replicas: 2,
      // 1 s made the sentinels of a loaded test machine take a new primary, slow to answer its
      // first pings, for dead, and fail over a second time a second after the first.
      downAfterMs: 1500,
      user: { name: 'tollway', password: 'drill:p@ss/word' },
      sentinelPassword: 'sentinel-word',
    });
    log(`redis: primary ${await group.primaryPort()}, replicas, 3 sentinels (${group.env.REDIS_SENTINELS})`);
    const env = { ...group.env, REDIS_PREFIX: PREFIX };

    // The organizations and their keys, through the CLI (itself through Sentinel).
    const cli = (...args: string[]) => runCli(env, args, entry);
    const plenty = ['--input-tokens', '100000000', '--output-tokens', '100000000', '--credit', '1000000'];
    const [chatOrg, turnsOrg] = await Promise.all([
      cli('orgs', 'create', '--name', 'Drill chat', '--requests', String(budget), ...plenty),
      cli('orgs', 'create', '--name', 'Drill turns', '--requests', '1000000', ...plenty),
    ]);
    const [chatKey, turnsKey] = await Promise.all([
      cli('keys', 'create', String(chatOrg.id)),
      cli('keys', 'create', String(turnsOrg.id)),
    ]);
    log(`organizations ${String(chatOrg.id)} (chat, ${budget} requests a minute) and ${String(turnsOrg.id)} (turns)`);
    platform = await startPlatform({ env, gateways: 2, workerKey: String(turnsKey.key), entry });
    const { gatewayUrls, apiUrl } = platform;
    log(`platform up after ${Math.round(performance.now() - startedAt)} ms`);

    // The load, recording every answer.
    const answers: Answer[] = [];
    const accepted: Array<{ sessionId: string; content: string }> = [];
    const sessionIds: string[] = [];
    let stopping = false;
    const record = (answer: Answer) => answers.push(answer);
    const call = async (kind: Answer['kind'], url: string, init: RequestInit, gateway = -1) => {
      const t0 = performance.now();
      try {
        const res = await httpJson(url, init, HANG_MS + LONG_POLL_S * 1000);
        const retryAfter = res.headers.get('retry-after');
        record({ kind, gateway, t0, t1: performance.now(), status: res.status, retryAfter });
        return res;
      } catch {
        record({ kind, gateway, t0, t1: performance.now(), status: 0, retryAfter: null });
        return null;
      }
    };
    const chatBody = JSON.stringify({
      model: SIM_MODEL,
      messages: [{ role: 'user', content: 'Drill.' }],
      max_tokens: 4,
    });
    const chatLoop = async (client: number) => {
      for (let n = 0; !stopping; n++) {
        const gateway = (client + n) % gatewayUrls.length;
        const url = `${gatewayUrls[gateway]}/v1/chat/completions`;
        const init = {
          method: 'POST',
          headers: { authorization: `Bearer ${String(chatKey.key)}`, 'content-type': 'application/json' },
          body: chatBody,
        };
        const res = await call('chat', url, init, gateway);
        if (res?.status !== 200) await sleep(100);
      }
    };
    const json = { 'content-type': 'application/json' };
    const sessionLoop = async (client: number) => {
      let sessionId: string | null = null;
      while (!sessionId && !stopping) {
        const res = await call('create', `${apiUrl}/sessions`, { method: 'POST', headers: json, body: '{}' });
        if (res?.status === 201) sessionId = (res.body as { session_id: string }).session_id;
        else await sleep(100);
      }
      if (!sessionId) return;
      sessionIds.push(sessionId);
      for (let n = 0; !stopping; n++) {
        const content = `drill ${client}.${n}`;
        const sent = await call('send', `${apiUrl}/sessions/${sessionId}/messages`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ content, user_params: { max_tokens: 4 } }),
        });
        if (sent?.status === 202) accepted.push({ sessionId, content });
        else if (sent?.status !== 409) {
          await sleep(100);
          continue;
        }
        // Until the turn ends (also after a 409: a turn of this session still runs).
        for (;;) {
          const polled = await call('poll', `${apiUrl}/sessions/${sessionId}?wait=true&timeout=${LONG_POLL_S}`, {});
          if (polled?.status === 200 && (polled.body as { status: string }).status !== 'running') break;
          if (polled?.status !== 200) await sleep(100);
          if (stopping) return;
        }
      }
    };
    const loadStartedAt = performance.now();
    const loops = [
      ...Array.from({ length: options.chatClients ?? 8 }, (_, i) => chatLoop(i)),
      ...Array.from({ length: options.sessionClients ?? 4 }, (_, i) => sessionLoop(i)),
    ];

    // The replication gap: numbered writes all along; those the new primary misses were lost.
    probe = createRedis(group.connection, { name: 'drill:probe', failFast: true });
    probe.on('error', () => undefined);
    const probeKey = `${PREFIX}probe`;
    const acked: Array<{ seq: number; at: number }> = [];
    const probing = (async () => {
      for (let seq = 1; !stopping; seq++) {
        try {
          await probe!.zadd(probeKey, seq, String(seq));
          acked.push({ seq, at: performance.now() });
        } catch {
          await sleep(20);
        }
        await sleep(2);
      }
    })();
    let phaseFrom = 0;

    /** Load, the event, the new primary, more load: what clients saw, and when acknowledged writes were lost. */
    const phase = async (
      name: string,
      event: () => Promise<unknown>,
    ): Promise<{ figures: PhaseFigures; lost: { from: number; to: number } | null }> => {
      await sleep(options.settleMs ?? 3000);
      const former = await group!.primaryPort();
      const at = performance.now();
      log(`${name}: primary ${former}`);
      await event();
      const promoted = await group!.waitForNewPrimary(former, 30_000);
      const promotedAfterMs = performance.now() - at;
      await group!.waitForNewPrimary(former, 30_000, 1);
      const replicatedAfterMs = performance.now() - at;
      log(
        `${name}: ${promoted} is the primary after ${Math.round(promotedAfterMs)} ms, with a replica after ${Math.round(replicatedAfterMs)} ms`,
      );
      // Until both services have answered well for a second (30 s at most), then the rest of the phase's load.
      const recoveryDeadline = performance.now() + 30_000;
      while (!answeringWell(answers, performance.now() - 1000) && performance.now() < recoveryDeadline)
        await sleep(100);
      await sleep(options.afterMs ?? 3000);
      const end = performance.now();
      // The writes acknowledged since the last phase that the new primary does not hold were lost.
      const onPromoted = group!.client(promoted);
      const held = new Set(await onPromoted.zrange(probeKey, 0, -1));
      onPromoted.disconnect();
      const lostAcks = acked.filter((ack) => ack.at >= phaseFrom && ack.at < end && !held.has(String(ack.seq)));
      phaseFrom = end;
      const lost = lostAcks.length > 0 ? { from: lostAcks[0]!.at, to: lostAcks[lostAcks.length - 1]!.at } : null;
      const lostWindowMs = lost ? lost.to - lost.from : 0;
      const figures = {
        ...summarize(answers, at, end),
        promotedAfterMs,
        replicatedAfterMs,
        lostWrites: lostAcks.length,
        lostWindowMs,
      };
      return { figures, lost };
    };
    const switchover = await phase('switchover', () => group!.switchover());
    const kill = await phase('kill -9', () => group!.killPrimary());
    stopping = true;
    await Promise.all([...loops, probing]);
    const endedAt = performance.now();
    const logs = platform.logs();

    // Every accepted turn ended, and its message is in its session's history.
    const turns = await checkTurns(apiUrl, sessionIds, accepted);
    const admitted = answers.filter((a) => a.kind === 'chat' && a.status === 200).length;
    // The buckets are full when the load starts (they never hold more than the budget): it may
    // spend the budget, and what refills while it runs.
    const allowed = budget + ((endedAt - loadStartedAt) * budget) / 60_000;
    const inWindow = (window: { from: number; to: number } | null) =>
      window
        ? answers.filter(
            (a) => a.kind === 'chat' && a.status === 200 && a.t0 >= window.from - 50 && a.t0 <= window.to + 50,
          ).length
        : 0;
    const slicesPerFailover = gatewayUrls.length * Math.ceil(budget / 64);
    const bound = 2 * slicesPerFailover + inWindow(switchover.lost) + inWindow(kill.lost);
    const figures: DrillFigures = {
      switchover: switchover.figures,
      kill: kill.figures,
      turns,
      budget: {
        budget,
        admitted,
        allowed: Math.floor(allowed),
        overshoot: Math.max(0, admitted - Math.floor(allowed)),
        bound,
      },
      durationMs: performance.now() - startedAt,
      logs,
    };
    return figures;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${platform?.logs() ?? ''}`);
  } finally {
    probe?.disconnect();
    await platform?.stop();
    await group?.stop();
  }
}

/** A failed answer: neither a success nor a 409 (a turn still running, which the client waits for). */
function failed(answer: Answer): boolean {
  return answer.status !== 200 && answer.status !== 201 && answer.status !== 202 && answer.status !== 409;
}

/**
 * Answers of both services since `since`: some succeeded, none failed. A budget 429 counts as an
 * answer that succeeded: admission worked (a spent budget can leave a chat client nothing else).
 */
function answeringWell(answers: readonly Answer[], since: number): boolean {
  const recent = answers.filter((a) => a.t1 >= since);
  const chat = recent.filter((a) => a.kind === 'chat');
  const sessions = recent.filter((a) => a.kind !== 'chat');
  return [chat, sessions].every((kind) => kind.length > 0 && !kind.some((a) => failed(a) && a.status !== 429));
}

/** What the answers of [from, to] show: failures, their retry advice, hangs, and when answers succeeded again. */
function summarize(answers: readonly Answer[], from: number, to: number) {
  const inPhase = answers.filter((a) => a.t0 >= from - HANG_MS && a.t1 >= from && a.t0 <= to);
  const failures: Record<string, number> = {};
  let withoutRetryAfter = 0;
  let unclear = 0;
  let slowestFailureMs = 0;
  let hangs = 0;
  for (const answer of inPhase) {
    const ms = answer.t1 - answer.t0;
    if (ms > HANG_MS + (answer.kind === 'poll' ? LONG_POLL_S * 1000 : 0)) hangs += 1;
    if (!failed(answer)) continue;
    failures[answer.status] = (failures[answer.status] ?? 0) + 1;
    // A long-poll's failure may come at the end of its own wait: its hangs are counted above.
    if (answer.kind !== 'poll') slowestFailureMs = Math.max(slowestFailureMs, ms);
    if (answer.status !== 503 && answer.status !== 429) unclear += 1;
    else if (answer.retryAfter === null) withoutRetryAfter += 1;
  }
  // A 429 is the budget speaking: admission worked, so it is an answer that succeeded.
  const recovered = (kinds: ReadonlyArray<Answer['kind']>) => {
    const mine = inPhase.filter((a) => kinds.includes(a.kind));
    const down = (a: Answer) => failed(a) && a.status !== 429;
    const lastFailure = Math.max(from, ...mine.filter(down).map((a) => a.t1));
    const firstSuccess = mine.filter((a) => !down(a) && a.t1 >= lastFailure).map((a) => a.t1);
    return firstSuccess.length === 0 ? Infinity : Math.min(...firstSuccess) - from;
  };
  const chat = recovered(['chat']);
  const sessions = recovered(['send', 'poll', 'create']);
  return {
    recoveredAfterMs: { chat, sessions, all: Math.max(chat, sessions) },
    answers: inPhase.length,
    failures,
    withoutRetryAfter,
    unclear,
    slowestFailureMs,
    hangs,
    sessionAnswers: inPhase
      .filter((a) => a.kind !== 'chat')
      .sort((a, b) => a.t1 - b.t1)
      .slice(-40)
      .map((a) => `${a.kind} ${a.status} ${Math.round(a.t1 - from)}`),
    chatAnswers: inPhase
      .filter((a) => a.kind === 'chat')
      .sort((a, b) => a.t1 - b.t1)
      .slice(-40)
      .map((a) => `${a.gateway}:${a.status} ${Math.round(a.t1 - from)}`),
  };
}

/**
 * Waits for every session to end its turn (the reaper's window at most) and checks each accepted
 * message: in its session's history (else lost: a 202 the platform forgot), its session idle or
 * in error (else stuck). Counts the last turns that completed and those that ended in error.
 */
async function checkTurns(
  apiUrl: string,
  sessionIds: readonly string[],
  accepted: ReadonlyArray<{ sessionId: string; content: string }>,
) {
  // Lease time (5 s) after an outage, then the reaper's lease and lost-job checks: 20 s is past them.
  const deadline = performance.now() + 20_000;
  let stuck = 0;
  const histories = new Map<string, Array<{ role: string; content: string | null }>>();
  for (const sessionId of sessionIds) {
    let status = 'running';
    while (status === 'running' && performance.now() < deadline) {
      const res = await httpJson(`${apiUrl}/sessions/${sessionId}?wait=true&timeout=1`).catch(() => null);
      status = res?.status === 200 ? (res.body as { status: string }).status : 'running';
      if (res?.status !== 200) await sleep(200);
    }
    if (status === 'running') stuck += 1;
    histories.set(sessionId, await readMessages(apiUrl, sessionId));
  }
  let completed = 0;
  let errored = 0;
  let lost = 0;
  for (const { sessionId, content } of accepted) {
    const history = histories.get(sessionId) ?? [];
    const at = history.findIndex((m) => m.role === 'user' && m.content === content);
    if (at === -1) lost += 1;
    else if (history[at + 1]?.role === 'assistant') completed += 1;
    else errored += 1;
  }
  return { accepted: accepted.length, completed, errored, lost, stuck };
}

/**
 * A session's messages, read again while the API answers anything but 200 (a 503 while its
 * connections settle after the failover); throws, naming the last answer, after 10 s.
 */
async function readMessages(
  apiUrl: string,
  sessionId: string,
): Promise<Array<{ role: string; content: string | null }>> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const res = await httpJson(`${apiUrl}/sessions/${sessionId}/messages`).catch((err: Error) => ({
      status: 0,
      body: err.message,
    }));
    if (res.status === 200 && Array.isArray(res.body))
      return res.body as Array<{ role: string; content: string | null }>;
    if (performance.now() > deadline) {
      throw new Error(`reading session ${sessionId}'s messages: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await sleep(200);
  }
}
