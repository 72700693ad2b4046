import { describeCase, encodeCase, fill, type FuzzCase, type ServiceName } from './fuzz-case';
import { HOSTILE_BEHAVIOURS, hostileModelId, isHostileModel, type HostileBehaviour } from './hostile-engine';
import { judgeAnswer, verdictOf, type Problem } from './oracles';
import type { Platform } from './platform';
import { sendRaw, type Outcome } from './raw-http';
import { BillingLedger } from './billing-ledger';
import { checkNothingHeld } from './gateway-holds';
import { SessionLedger } from './session-ledger';

/** Limits a campaign holds the services to. */
export interface CampaignLimits {
  /** Longest wait for a complete answer to one case, ms. */
  caseTimeoutMs: number;
  /** Highest RSS either service process may reach, bytes. */
  rssLimitBytes: number;
  /** How long turns may take to end before the consistency check, ms. */
  settleMs: number;
}

/** Running counts of one campaign. */
export interface Tally {
  sent: number;
  '2xx': number;
  '3xx': number;
  '4xx': number;
  '5xx': number;
  /** 502/504 in the error shape for a hostile engine's answer: the right answer, not counted as 5xx. */
  upstream: number;
  closed: number;
  crashes: number;
  hangs: number;
  /** Cases or checkpoints that broke a rule, by rule. */
  problems: Record<string, number>;
}

/** One broken rule with what reproduces it. */
export interface Finding {
  /** Where the case came from, e.g. `seed 42 case 17` or a fast-check path. */
  origin: string;
  request: string;
  outcome: string;
  problems: Problem[];
}

/**
 * Sends cases to the platform and judges them: every answer by the shared oracles, process
 * liveness after each case, and at checkpoints health probes, RSS and the session ledger. A
 * crashed service is started again, so one crash does not hide the rest of a run.
 */
/** How long a session event stream that stays open is read before the case closes it, ms. */
const SESSION_STREAM_WINDOW_MS = 1500;

export class Campaign {
  readonly tally: Tally = {
    sent: 0,
    '2xx': 0,
    '3xx': 0,
    '4xx': 0,
    '5xx': 0,
    upstream: 0,
    closed: 0,
    crashes: 0,
    hangs: 0,
    problems: {},
  };
  readonly findings: Finding[] = [];
  readonly ledger: SessionLedger;
  readonly billing: BillingLedger;
  private exitsSeen = { gateway: 0, sessions: 0 };
  private readonly restarting = new Map<ServiceName, Promise<void>>();

  constructor(
    readonly platform: Platform,
    readonly limits: CampaignLimits,
  ) {
    this.ledger = new SessionLedger(
      () => platform.sessions.port,
      platform.context.sessionsOrgKey,
      platform.context.tenantSessionsKey,
    );
    this.billing = new BillingLedger(() => platform.gateway.port, platform.context.adminToken, platform.context.orgId);
  }

  /** Sends one case and returns what it broke (also kept in `findings`). */
  async run(c: FuzzCase, origin: string): Promise<{ outcome: Outcome; problems: Problem[] }> {
    const service = this.platform.service(c.service);
    const sessionId = c.service === 'sessions' ? await this.ledger.sessionFor(c.pick) : this.platform.context.sessionId;
    const hostileModel = hostileModelId(HOSTILE_BEHAVIOURS[c.pick % HOSTILE_BEHAVIOURS.length] as HostileBehaviour);
    const ctx = { ...this.platform.context, port: service.port, sessionId, hostileModel };
    // The session cases act as an organization of their own, whose turns bill it (see SendContext).
    if (c.service === 'sessions') ctx.orgKey = ctx.sessionsOrgKey;
    // A session event stream stays open until a turn ends (or for good, with follow): it is read
    // for a window, as its first events, then closed.
    const window = c.service === 'sessions' ? SESSION_STREAM_WINDOW_MS : undefined;
    const outcome = await sendRaw(ctx.host, service.port, encodeCase(c, ctx), this.limits.caseTimeoutMs, window);
    this.ledger.record(c, fill(c.target, ctx), outcome, origin, ctx);
    this.billing.record(c, outcome);
    this.count(c, outcome);
    const problems = judgeAnswer(c, outcome, hostileModel);
    problems.push(...(await this.crashes()));
    if (outcome.kind !== 'response' && !(await this.answers(c.service))) {
      // Alive but deaf (a blocked event loop): report it with this case, then start it afresh so
      // the rest of the run is not a string of timeouts.
      problems.push({ rule: 'liveness', detail: `${c.service} stopped answering /healthz after this case; restarted` });
      await this.platform.service(c.service).stop();
      await this.platform.restart(c.service);
    }
    if (problems.length > 0)
      this.keep({ origin, request: describeCase(c, ctx), outcome: summarize(outcome), problems });
    return { outcome, problems };
  }

  /**
   * Health probes, RSS, (with `ledger`, only while no session case is in flight) the session
   * ledger and (with `billing`, only while no gateway case is in flight) the billing ledger; run
   * every batch of cases and at the end.
   */
  async checkpoint(
    origin: string,
    { ledger = true, billing = true }: { ledger?: boolean; billing?: boolean } = {},
  ): Promise<Problem[]> {
    const problems: Problem[] = [...(await this.crashes())];
    for (const name of ['gateway', 'sessions'] as const) {
      const service = this.platform.service(name);
      const rss = service.sampleRss();
      if (rss > this.limits.rssLimitBytes)
        problems.push({
          rule: 'memory',
          detail: `${name} RSS ${(rss / 2 ** 20).toFixed(0)} MiB over ${(this.limits.rssLimitBytes / 2 ** 20).toFixed(0)} MiB`,
        });
      if (!(await this.answers(name))) {
        problems.push({ rule: 'liveness', detail: `${name} did not answer /healthz within 5 s` });
        this.tally.hangs += 1;
      }
    }
    if (this.platform.gateway.alive) {
      await this.platform.reviveVictim().catch(() => undefined);
      await this.platform.reviveConsole().catch(() => undefined);
    }
    if (ledger && this.platform.sessions.alive)
      problems.push(
        ...(await this.ledger
          .check(this.limits.settleMs)
          .catch((err: Error) => [{ rule: 'consistency' as const, detail: `ledger check failed: ${err.message}` }])),
      );
    if (billing && this.platform.gateway.alive) {
      problems.push(
        ...(await this.billing
          .check(this.limits.settleMs)
          .catch((err: Error) => [{ rule: 'billing' as const, detail: `billing check failed: ${err.message}` }])),
      );
      // With the session lane paused too (and, after the ledger's wait, no turn running), no request
      // at all is in flight; else only the hostile models, which serve fuzz cases alone, are idle.
      const everything = ledger && this.platform.sessions.alive;
      problems.push(
        ...(await checkNothingHeld(this.platform.gateway.port, everything ? () => true : isHostileModel, {
          streams: everything,
          settleMs: this.limits.settleMs,
        }).catch((err: Error) => [{ rule: 'consistency' as const, detail: `holds check failed: ${err.message}` }])),
      );
    }
    if (problems.length > 0)
      this.keep({ origin, request: '(checkpoint: the cases since the previous one)', outcome: '', problems });
    return problems;
  }

  /** True when the service answers `/healthz` with 200 within 5 s. */
  private answers(name: ServiceName): Promise<boolean> {
    const port = this.platform.service(name).port;
    return fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) })
      .then((res) => res.status === 200)
      .catch(() => false);
  }

  /** The final line of a run: `N sent, N 4xx, N 5xx, N crashes, N hangs`. */
  summaryLine(): string {
    const t = this.tally;
    return `${t.sent} sent, ${t['4xx']} 4xx, ${t['5xx']} 5xx, ${t.crashes} crashes, ${t.hangs} hangs`;
  }

  /** Crashes since the last look (each service started again); they also count in `tally.crashes`. */
  private async crashes(): Promise<Problem[]> {
    const problems: Problem[] = [];
    for (const name of ['gateway', 'sessions'] as ServiceName[]) {
      const service = this.platform.service(name);
      // Both lanes look; the first to see a dead process reports and restarts it, the other waits.
      const pending = this.restarting.get(name);
      if (pending) {
        await pending;
        continue;
      }
      if (service.alive && service.exits.length === this.exitsSeen[name]) continue;
      const restart = (async () => {
        // A process that dies of a case may need a moment to be seen dead.
        await new Promise((r) => setTimeout(r, 50));
        const exits = service.exits.slice(this.exitsSeen[name]);
        this.exitsSeen[name] = service.exits.length;
        this.tally.crashes += Math.max(1, exits.length);
        problems.push({
          rule: 'crash',
          detail: `${exits.join('; ') || `${name} is not running`}; last log lines:\n${service.lastLines(15)}`,
        });
        if (!service.alive) await this.platform.restart(name);
      })();
      this.restarting.set(name, restart);
      await restart.finally(() => this.restarting.delete(name));
    }
    return problems;
  }

  private count(c: FuzzCase, outcome: Outcome): void {
    this.tally.sent += 1;
    const verdict = verdictOf(c, outcome);
    if (verdict === 'hang') this.tally.hangs += 1;
    else this.tally[verdict] += 1;
  }

  private keep(finding: Finding): void {
    for (const p of finding.problems) this.tally.problems[p.rule] = (this.tally.problems[p.rule] ?? 0) + 1;
    this.findings.push(finding);
  }
}

function summarize(outcome: Outcome): string {
  if (outcome.kind === 'response') {
    const body = outcome.body.toString('utf8');
    return `${outcome.status} after ${outcome.ms} ms: ${JSON.stringify(body.length > 200 ? `${body.slice(0, 200)}…` : body)}`;
  }
  if (outcome.kind === 'closed')
    return `connection closed without an answer after ${outcome.ms} ms (${outcome.reason})`;
  return `no complete answer after ${outcome.ms} ms`;
}
