import type { FuzzCase } from './fuzz-case';
import type { Problem } from './oracles';
import type { Outcome } from './raw-http';

const HOST = '127.0.0.1';
/** The usage endpoint's longest window; usage is kept two hours. */
const USAGE_WINDOW_MINUTES = 120;
/** A run longer than this is past what the window can still hold whole: the check stops. */
const CHECKED_FOR_MS = (USAGE_WINDOW_MINUTES - 10) * 60_000;

/**
 * What the gateway must have billed the fuzz organization, learnt from its own answers: every
 * completion it served (a 200 carrying a completion or an event stream) is one request in the
 * organization's usage, exactly once. Requests whose fate the fuzz cannot see (no answer, an
 * answer that may belong to other bytes, pipelined copies cut off mid-stream, which are billed as
 * aborts) may or may not be. So after a settle period the usage must lie between the completions
 * seen and those plus the unseen: under is a served completion never charged, over one charged
 * twice. Only the fuzz cases use the organization's key (the session service's agents have
 * their own), so nothing else bills it.
 */
export class BillingLedger {
  /** Completions answered 200: each must be billed exactly once. */
  private served = 0;
  /** Requests that may have been served without the fuzz seeing it. */
  private unseen = 0;
  private readonly started = Date.now();
  /** The usage the last check read. */
  billed = 0;

  constructor(
    private readonly port: () => number,
    private readonly adminToken: string,
    private readonly orgId: string,
  ) {}

  /** Learns from one answer of the gateway. */
  record(c: FuzzCase, outcome: Outcome): void {
    if (c.service !== 'gateway') return;
    const framed = FRAMED.has(c.framing.kind) && outcome.kind === 'response';
    if (framed && outcome.status === 200) {
      const served = completionIn(outcome);
      if (served === true) this.served += 1;
      else if (served === null && mayComplete(c)) this.unseen += 1;
    } else if (!framed && mayComplete(c)) this.unseen += 1;
    // Later copies of a pipelined request are cut off when the fuzz closes after the first answer.
    if (c.framing.kind === 'pipelined' && mayComplete(c)) this.unseen += c.framing.copies;
  }

  /** Counts completions a test served on the fuzz organization's key outside the cases. */
  noteServed(count: number): void {
    this.served += count;
  }

  /**
   * Waits up to `settleMs` for the usage to reach the completions seen (settlements go out in
   * batches, a second apart for usage), then compares.
   */
  async check(settleMs: number): Promise<Problem[]> {
    if (Date.now() - this.started > CHECKED_FOR_MS) return [];
    const deadline = Date.now() + settleMs;
    for (;;) {
      const res = await fetch(
        `http://${HOST}:${this.port()}/admin/v1/organizations/${this.orgId}/usage?minutes=${USAGE_WINDOW_MINUTES}`,
        { headers: { authorization: `Bearer ${this.adminToken}` }, signal: AbortSignal.timeout(10_000) },
      );
      if (res.status !== 200) return [{ rule: 'billing', detail: `GET usage answered ${res.status}` }];
      this.billed = ((await res.json()) as { totals: { requests: number } }).totals.requests;
      if (this.billed >= this.served || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const most = this.served + this.unseen;
    if (this.billed < this.served)
      return [
        {
          rule: 'billing',
          detail: `${this.served} completions served, ${this.billed} billed after ${settleMs} ms: ${this.served - this.billed} never charged`,
        },
      ];
    if (this.billed > most)
      return [
        {
          rule: 'billing',
          detail: `${this.billed} requests billed, at most ${most} could have been served (${this.served} seen, ${this.unseen} unseen)`,
        },
      ];
    return [];
  }

  /** The counts, for a run's summary. */
  summary(): string {
    return `${this.served} completions served, ${this.billed} requests billed (${this.unseen} requests unseen)`;
  }
}

/**
 * Whether a request may reach the chat route, read broadly (a wider "may" only widens the bound):
 * a POST to a path that names chat.
 */
function mayComplete(c: FuzzCase): boolean {
  return c.method === 'POST' && /chat/i.test(c.target.split('?')[0] ?? '');
}

/** Framings whose first answer is the answer to the request as the fuzz sent it. */
const FRAMED = new Set<FuzzCase['framing']['kind']>(['length', 'none', 'pipelined', 'encoding']);

/**
 * Whether a 200 carries a served completion (an event stream, or a `chat.completion` object),
 * something else (a model list, an organization), or null when its body cannot tell (cut short).
 */
function completionIn(outcome: Extract<Outcome, { kind: 'response' }>): boolean | null {
  if ((outcome.headers['content-type'] ?? '').startsWith('text/event-stream')) return true;
  if (outcome.body.length < outcome.bodyBytes) return null;
  try {
    return (JSON.parse(outcome.body.toString('utf8')) as { object?: unknown } | null)?.object === 'chat.completion';
  } catch {
    return null;
  }
}
