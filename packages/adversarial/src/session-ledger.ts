import { ANOTHER_ORGANIZATION } from './endpoints';
import type { FuzzCase } from './fuzz-case';
import { toJsonBytes, type RefValues } from './hostile-json';
import type { Problem } from './oracles';
import type { Outcome } from './raw-http';

const HOST = '127.0.0.1';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Live sessions kept at hand for cases that name one. */
const POOL_SIZE = 4;

interface Known {
  /** Messages the history must hold at least: preloaded state plus accepted messages. */
  minHistory: number;
  /** Set when a case named the session and its answer may not tell: it may be gone without a 204 seen. */
  uncertain: boolean;
  /** The last cases that named the session, for a report. */
  namedBy: string[];
}

/**
 * What the session service must still hold, learnt from its own answers: a 201 adds a session
 * (with its preloaded state), a 202 adds a message, a 204 removes the session. After a settle
 * period the service's counts, lists and histories are compared with it ("nothing lost").
 */
export class SessionLedger {
  private readonly sessions = new Map<string, Known>();
  private readonly touched = new Set<string>();
  /** Sessions found on the server that no answer announced (a create whose answer was cut off). */
  adopted = 0;

  constructor(
    private readonly port: () => number,
    private readonly orgKey: string,
    /** The key of another organization's cases: its sessions count in `/health`, not in this ledger. */
    private readonly tenantKey: string,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /** A live session id for a case's `{sessionId}`, creating a few when the pool runs low. */
  async sessionFor(pick: number): Promise<string> {
    while (this.sessions.size < POOL_SIZE) {
      const res = await this.call('POST', '/sessions', '{"state":[{"role":"user","content":"seed"}]}');
      if (res.status !== 201) throw new Error(`creating a pool session answered ${res.status}`);
      this.add(((await res.json()) as { session_id: string }).session_id, 1);
    }
    const ids = [...this.sessions.keys()];
    return ids[pick % ids.length] as string;
  }

  /** Learns from one answer of the session service. */
  record(c: FuzzCase, target: string, outcome: Outcome, origin: string, refs: RefValues): void {
    // Another organization's answers are about its own sessions (or refusals), never this ledger's.
    if (c.service !== 'sessions' || c.endpoint.endsWith(ANOTHER_ORGANIZATION)) return;
    const path = target.split('?')[0] ?? '';
    const named = this.sessions.get(safeDecode(/^\/sessions\/([^/]+)/.exec(path)?.[1] ?? '').toLowerCase());
    if (named) {
      named.namedBy = [...named.namedBy.slice(-5), origin];
      // Broken framing can carry the request out and answer for the leftover bytes instead
      // (pipelined requests are framed: the first answer is the first request's).
      const framed = c.framing.kind === 'length' || c.framing.kind === 'none' || c.framing.kind === 'pipelined';
      if (!framed || outcome.kind !== 'response' || outcome.status >= 500) named.uncertain = true;
    }
    if (outcome.kind !== 'response') return;
    // A send answered as a stream names its session in the path, not in a JSON body.
    const streamed = acceptedAsStream(c, outcome);
    const id = streamed
      ? safeDecode(/^\/sessions\/([^/]+)/.exec(path)?.[1] ?? '').toLowerCase()
      : sessionIdOf(outcome.body);
    if (outcome.status === 201 && id) this.add(id, stateLength(c, refs));
    else if ((outcome.status === 202 || streamed) && id) {
      const known = this.sessions.get(id);
      if (known) known.minHistory += 1;
      this.touched.add(id);
    } else if (outcome.status === 204 && c.method === 'DELETE') {
      // OPTIONS is 204 too (with Allow), and deletes nothing.
      const match = /^\/sessions\/([^/]+)$/.exec(path);
      if (match) this.sessions.delete(safeDecode(match[1] as string).toLowerCase());
    }
  }

  /**
   * Waits until no turn runs (up to `settleMs`), then compares: every session the ledger holds is
   * listed, `/health` counts the listed sessions, no worker still runs a turn, and every history
   * touched since the last check holds at least what was accepted.
   */
  async check(settleMs: number): Promise<Problem[]> {
    const problems: Problem[] = [];
    let listed: Array<{ session_id: string; status: string; total_messages: number }> = [];
    const deadline = Date.now() + settleMs;
    for (;;) {
      const res = await this.call('GET', '/sessions');
      if (res.status !== 200) return [{ rule: 'consistency', detail: `GET /sessions answered ${res.status}` }];
      listed = (await res.json()) as typeof listed;
      if (!listed.some((s) => s.status === 'running') || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const running = listed.filter((s) => s.status === 'running').map((s) => s.session_id);
    if (running.length > 0)
      problems.push({
        rule: 'consistency',
        detail: `turns still running ${settleMs} ms after the last case: ${running.slice(0, 5).join(', ')}`,
      });
    const ids = new Set(listed.map((s) => s.session_id.toLowerCase()));
    const lost: string[] = [];
    for (const [id, known] of this.sessions) {
      if (ids.has(id)) continue;
      if (!known.uncertain) lost.push(`${id} (named by: ${known.namedBy.join(' | ') || 'none'})`);
      this.sessions.delete(id);
    }
    if (lost.length > 0)
      problems.push({
        rule: 'consistency',
        detail: `sessions lost (created, never deleted, not listed): ${lost.slice(0, 3).join(', ')}`,
      });
    for (const id of ids) {
      if (!this.sessions.has(id)) {
        this.add(id, 0);
        this.adopted += 1;
      }
    }
    const health = (await (await this.call('GET', '/health')).json()) as {
      total_sessions: number;
      running_workers: number;
    };
    // A tenant case whose mutated path named a fresh id made a session of the other organization's.
    const tenantListed = (await (await this.call('GET', '/sessions', undefined, this.tenantKey)).json()) as unknown[];
    if (health.total_sessions !== listed.length + tenantListed.length)
      problems.push({
        rule: 'consistency',
        detail: `/health total_sessions ${health.total_sessions} but ${listed.length} sessions listed (and ${tenantListed.length} of the other organization)`,
      });
    if (running.length === 0 && health.running_workers !== 0)
      problems.push({
        rule: 'consistency',
        detail: `/health running_workers ${health.running_workers} with no session running`,
      });
    for (const id of this.touched) {
      const known = this.sessions.get(id);
      if (!known) continue;
      const res = await this.call('GET', `/sessions/${id}/messages`);
      if (res.status !== 200) {
        problems.push({ rule: 'consistency', detail: `GET /sessions/${id}/messages answered ${res.status}` });
        continue;
      }
      const history = (await res.json()) as unknown[];
      if (history.length < known.minHistory)
        problems.push({
          rule: 'consistency',
          detail: `session ${id} holds ${history.length} messages, ${known.minHistory} were accepted (named by: ${known.namedBy.join(' | ')}): ${JSON.stringify(history).slice(0, 600)}`,
        });
    }
    this.touched.clear();
    return problems;
  }

  private add(id: string, minHistory: number): void {
    this.sessions.set(id.toLowerCase(), { minHistory, uncertain: false, namedBy: [] });
  }

  private call(method: string, path: string, body?: string, key = this.orgKey): Promise<Response> {
    return fetch(`http://${HOST}:${this.port()}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(10_000),
    });
  }
}

function sessionIdOf(body: Buffer): string | null {
  try {
    const id = (JSON.parse(body.toString('utf8')) as { session_id?: unknown }).session_id;
    return typeof id === 'string' && UUID.test(id) ? id.toLowerCase() : null;
  } catch {
    return null;
  }
}

/** A send answered with its turn's stream (200, `text/event-stream`): accepted, as a 202 is. */
function acceptedAsStream(c: FuzzCase, outcome: Extract<Outcome, { kind: 'response' }>): boolean {
  return (
    c.method === 'POST' &&
    outcome.status === 200 &&
    /\/messages\/?$/.test(c.target.split('?')[0] ?? '') &&
    (outcome.headers['content-type'] ?? '').startsWith('text/event-stream')
  );
}

/** How many preloaded messages a create request carried, read from the bytes sent (0 when they are not JSON). */
function stateLength(c: FuzzCase, refs: RefValues): number {
  try {
    const bytes =
      c.body instanceof Uint8Array ? Buffer.from(c.body) : c.body === null ? null : toJsonBytes(c.body, refs);
    const state =
      bytes === null ? undefined : (JSON.parse(bytes.toString('utf8')) as { state?: unknown } | null)?.state;
    return Array.isArray(state) ? state.length : 0;
  } catch {
    return 0;
  }
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
