import type { ServerResponse } from 'node:http';
import type { Redis } from 'ioredis';
import { drainedOrClosed, onClientGone, type Logger } from '@tollway/service-kit';
import { sessionKeys } from '../store/session-keys';
import { STREAM_START, streamKeys, type StreamKeys } from '../store/event-log-keys';
import { compareEventIds } from './event-ids';
import { attachReaderScript } from './lua/attach-reader.script';
import { SSE_HEARTBEAT, sseEvent } from './sse-format';

/** Options of EventReaderHub. */
export interface EventReaderHubOptions {
  /** The API's command connection (attach, backfills, watch refresh, unblocking the reader). */
  redis: Redis;
  /** A connection of its own for the blocking reads (XREAD BLOCK holds it); closed by the caller. */
  reader: Redis;
  prefix: string;
  logger: Logger;
  /** A heartbeat comment to every client this often, ms. */
  heartbeatMs: number;
  /** Bytes a client may leave unread before it is dropped. */
  clientBufferBytes: number;
  /** Streams one organization may hold open here. */
  maxStreamsPerOrg: number;
  /** Lifetime of a watch key, ms (refreshed at a third of it while clients remain); default WATCH_TTL_MS. */
  watchTtlMs?: number;
  /** Longest a blocking read waits, ms; default 5000. */
  blockMs?: number;
}

/**
 * How long a session stays watched after its last reader leaves, ms: a client that reconnects
 * within it finds the worker still writing the turn as it runs (a later one gets the turn's text
 * so far in one delta).
 */
export const WATCH_TTL_MS = 15_000;
/**
 * Entries one blocking read takes per session (a busy session cannot starve the others), and a
 * catch-up page. It bounds what one read adds to a client's buffer (a delta is at most 16 Ki
 * characters, a custom event 64 KiB): a client holds at most its buffer bound plus one read.
 */
const READ_COUNT = 50;
/** Waits after a failed read, ms; the last repeats. */
const READ_RETRY_MS = [100, 250, 500, 1000, 2000];

/** A log entry as the hub reads it. */
interface Entry {
  id: string;
  type: string;
  org: string;
  previous: string;
  json: string;
  /** The SSE frame, made once for every client. */
  frame?: string;
}

/** One client of a session's events. */
interface Client {
  res: ServerResponse;
  org: string;
  follow: boolean;
  /** The id of the last entry delivered (or skipped), where the client's stream stands. */
  lastId: string;
  /** The id a client resumed from that lies past the log's end: its first entry is told as a gap after it. */
  gapAfter: string | null;
  /** Entries of the shared read kept while the client's own backfill runs. */
  queued: Entry[] | null;
  queuedBytes: number;
  ended: boolean;
  stopListening: () => void;
}

/** The clients of one session on this process, sharing one read. */
interface Group {
  sessionId: string;
  key: string;
  /** The id the shared read goes on from. */
  cursor: string;
  clients: Set<Client>;
}

/** What `open` answers. */
export type OpenedStream =
  | { kind: 'missing' }
  | { kind: 'too_many' }
  | {
      kind: 'ok';
      /** Where a new reader starts (the id its first frame carries); the resume id when resuming. */
      start: string;
      /** Serves the events from `start` to `res` (whose head is written); ends with the turn unless `follow`. */
      attach(res: ServerResponse, follow: boolean): void;
      /** Gives the slot back without streaming (the answer went otherwise). */
      release(): void;
    };

/**
 * The API side of the session event streams, one per process: ONE blocking read (XREAD over the
 * logs of every session that has clients here, on a connection of its own) feeds every client,
 * so a thousand readers of a session cost one read, not a thousand. An event is formatted once
 * and written to each client; a client that does not drain what it is sent (more than
 * `clientBufferBytes` still waiting when the next read or heartbeat comes) is dropped and resumes
 * by id, so a slow client holds neither the read nor more than its bound and one read of memory. A client that starts behind the shared read catches up with reads of
 * its own (pages of the log), then joins it. While a session has clients here, its watch key is
 * refreshed; a heartbeat comment goes to every client.
 */
export class EventReaderHub {
  private readonly groups = new Map<string, Group>();
  private readonly byKey = new Map<string, Group>();
  private readonly streamsPerOrg = new Map<string, number>();
  private readonly keys: StreamKeys;
  private readonly watchTtlMs: number;
  private readonly blockMs: number;
  private readonly timers: NodeJS.Timeout[] = [];
  private readerId: number | null = null;
  /** Fails the read in flight (its connection closed). */
  private abandonRead: ((err: Error) => void) | null = null;
  private reading = false;
  private unblocking = false;
  private wake: (() => void) | null = null;
  private closed = false;
  private loopDone: Promise<void> | null = null;
  private failures = 0;

  constructor(private readonly options: EventReaderHubOptions) {
    this.keys = streamKeys(options.prefix);
    this.watchTtlMs = options.watchTtlMs ?? WATCH_TTL_MS;
    this.blockMs = options.blockMs ?? 5000;
    // A read the connection lost is never answered (it is not sent again): it fails here, and the
    // loop reads again on the new connection, whose client id it asks first.
    options.reader.on('close', () => {
      this.readerId = null;
      this.abandonRead?.(new Error('the event read connection closed'));
    });
  }

  /** Starts the shared read and the heartbeat and watch timers. */
  start(): void {
    this.loopDone ??= this.loop();
    const every = (ms: number, run: () => void) => {
      const timer = setInterval(run, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.options.heartbeatMs, () => this.heartbeat());
    every(Math.max(100, Math.floor(this.watchTtlMs / 3)), () => void this.refreshWatches());
  }

  /** Streams one organization may hold open here. */
  get maxStreamsPerOrg(): number {
    return this.options.maxStreamsPerOrg;
  }

  /** Clients streaming now. */
  get size(): number {
    let total = 0;
    for (const group of this.groups.values()) total += group.clients.size;
    return total;
  }

  /**
   * Checks the session is `org`'s, marks it watched and finds where its stream starts (the resume
   * id, or for a new reader its running turn's start or the log's end), holding one of the
   * organization's stream slots until the stream ends or `release()`.
   */
  async open(sessionId: string, org: string | null, resumeId: string | null): Promise<OpenedStream> {
    const orgKey = org ?? '';
    if ((this.streamsPerOrg.get(orgKey) ?? 0) >= this.options.maxStreamsPerOrg) return { kind: 'too_many' };
    this.streamsPerOrg.set(orgKey, (this.streamsPerOrg.get(orgKey) ?? 0) + 1);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const left = (this.streamsPerOrg.get(orgKey) ?? 1) - 1;
      if (left > 0) this.streamsPerOrg.set(orgKey, left);
      else this.streamsPerOrg.delete(orgKey);
    };
    let found: string[];
    try {
      found = (await attachReaderScript.run(
        this.options.redis,
        [sessionKeys(this.options.prefix).session(sessionId), this.keys.events(sessionId), this.keys.watch(sessionId)],
        [orgKey, this.watchTtlMs, this.keys.watchChannel, sessionId],
      )) as string[];
    } catch (err) {
      release();
      throw err;
    }
    if (found[0] !== 'ok') {
      release();
      return { kind: 'missing' };
    }
    const [, fresh, tail] = found as [string, string, string];
    // A resume id past the log's end (not one it gave, or from a log since expired) reads on from
    // the end, and its first event comes after a `stream.truncated`: what followed it may be lost.
    const pastEnd = resumeId !== null && compareEventIds(resumeId, tail) > 0;
    const start = resumeId === null ? fresh : pastEnd ? tail : resumeId;
    return {
      kind: 'ok',
      start,
      release,
      attach: (res, follow) => this.attach(sessionId, orgKey, start, pastEnd ? resumeId : null, res, follow, release),
    };
  }

  /** Ends every stream (each client resumes elsewhere) and stops the read. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    for (const group of [...this.groups.values()]) for (const client of [...group.clients]) this.end(group, client);
    this.wake?.();
    this.interrupt();
    await this.loopDone;
  }

  private attach(
    sessionId: string,
    org: string,
    readFrom: string,
    gapAfter: string | null,
    res: ServerResponse,
    follow: boolean,
    release: () => void,
  ): void {
    let group = this.groups.get(sessionId);
    if (!group) {
      group = { sessionId, key: this.keys.events(sessionId), cursor: readFrom, clients: new Set() };
      this.groups.set(sessionId, group);
      this.byKey.set(group.key, group);
      this.interrupt();
    }
    const client: Client = {
      res,
      org,
      follow,
      lastId: readFrom,
      gapAfter,
      queued: null,
      queuedBytes: 0,
      ended: false,
      stopListening: () => undefined,
    };
    group.clients.add(client);
    const joined = group;
    client.stopListening = onClientGone(res, () => this.end(joined, client));
    res.once('close', release);
    if (compareEventIds(readFrom, group.cursor) < 0) void this.backfill(group, client, readFrom, group.cursor);
  }

  /** Reads the client's way from `from` up to the shared read's `upTo`, keeping the shared entries meanwhile. */
  private async backfill(group: Group, client: Client, from: string, upTo: string): Promise<void> {
    client.queued = [];
    try {
      for (let after = from; !client.ended;) {
        const page = (await this.options.redis.xrange(group.key, `(${after}`, upTo, 'COUNT', READ_COUNT)) as Array<
          [string, string[]]
        >;
        for (const raw of page) this.deliver(group, client, toEntry(raw), true);
        if (page.length < READ_COUNT) break;
        after = page.at(-1)![0];
        if (client.res.writableNeedDrain) await drainedOrClosed(client.res);
      }
    } catch (err) {
      this.options.logger.warn('event stream backfill failed; the client resumes by id', {
        err: (err as Error).message,
      });
      this.drop(group, client);
      return;
    }
    const queued = client.queued;
    client.queued = null;
    client.queuedBytes = 0;
    for (const entry of queued) this.deliver(group, client, entry);
  }

  private async loop(): Promise<void> {
    const { reader, logger } = this.options;
    while (!this.closed) {
      if (this.groups.size === 0) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = null;
        continue;
      }
      this.reading = true;
      let reply: unknown;
      // The groups this read is for: a reply is applied only to the very group it read for (one
      // made again meanwhile starts from its own cursor).
      const read = new Map([...this.groups.values()].map((group) => [group.key, group]));
      try {
        const groups = [...read.values()];
        reply = await new Promise((resolve, reject) => {
          this.abandonRead = reject;
          (async () => {
            this.readerId ??= Number(await reader.client('ID'));
            return reader.call(
              'XREAD',
              'COUNT',
              READ_COUNT,
              'BLOCK',
              this.blockMs,
              'STREAMS',
              ...groups.map((group) => group.key),
              ...groups.map((group) => group.cursor),
            );
          })().then(resolve, reject);
        });
        this.failures = 0;
      } catch (err) {
        if (this.closed) break;
        if (this.failures++ === 0)
          logger.warn('reading session events failed; retrying', { err: (err as Error).message });
        await sleep(READ_RETRY_MS[Math.min(this.failures - 1, READ_RETRY_MS.length - 1)] as number);
        continue;
      } finally {
        this.reading = false;
        this.abandonRead = null;
      }
      for (const [key, raws] of (reply as Array<[string, Array<[string, string[]]>]> | null) ?? []) {
        const group = this.byKey.get(key);
        if (!group || group !== read.get(key) || raws.length === 0) continue;
        group.cursor = raws.at(-1)![0];
        const entries = raws.map(toEntry);
        for (const client of [...group.clients]) {
          // A client still holding more than its bound from earlier reads is not keeping up.
          if (client.queued === null && client.res.writableLength > this.options.clientBufferBytes) {
            this.drop(group, client);
            continue;
          }
          // One write to the socket for the read's frames, not one each.
          client.res.cork();
          for (const entry of entries) this.deliver(group, client, entry);
          client.res.uncork();
        }
      }
    }
  }

  /**
   * Ends the blocking read in flight so the next one includes a session just added. CLIENT UNBLOCK
   * finds nothing to unblock when it arrives before the read blocks: it is tried again until the
   * read has returned.
   */
  private interrupt(): void {
    if (!this.reading) {
      this.wake?.();
      return;
    }
    if (this.unblocking) return;
    this.unblocking = true;
    void (async () => {
      try {
        while (this.reading && this.readerId !== null) {
          const unblocked = await this.options.redis.client('UNBLOCK', this.readerId).catch(() => 0);
          if (unblocked === 1) break;
          await sleep(5);
        }
      } finally {
        this.unblocking = false;
      }
    })();
  }

  /** Sends `entry` to `client` (kept for later while its catch-up runs, unless it is the catch-up's). */
  private deliver(group: Group, client: Client, entry: Entry, catchUp = false): void {
    if (client.ended) return;
    if (client.queued && !catchUp) {
      client.queued.push(entry);
      client.queuedBytes += entry.json.length;
      if (client.queuedBytes > this.options.clientBufferBytes) this.drop(group, client);
      return;
    }
    if (compareEventIds(entry.id, client.lastId) <= 0) return;
    const previous = client.lastId;
    client.lastId = entry.id;
    // An entry of another organization's session that had this id before (deleted, then made
    // again with PUT): never shown, and not a gap.
    if (entry.org !== client.org) return;
    if (client.gapAfter !== null || (entry.previous || STREAM_START) !== previous) {
      const truncated = {
        type: 'stream.truncated',
        session_id: group.sessionId,
        last_event_id: client.gapAfter ?? previous,
      };
      client.gapAfter = null;
      client.res.write(sseEvent('stream.truncated', JSON.stringify(truncated)));
    }
    client.res.write((entry.frame ??= sseEvent(entry.type, entry.json, entry.id)));
    if (entry.type === 'turn.cancelled' || (!client.follow && isTurnEnd(entry.type))) this.end(group, client);
  }

  private heartbeat(): void {
    for (const group of this.groups.values()) {
      for (const client of group.clients) {
        if (client.ended) continue;
        client.res.write(SSE_HEARTBEAT);
        if (client.res.writableLength > this.options.clientBufferBytes) this.drop(group, client);
      }
    }
  }

  /**
   * Keeps the sessions with clients here watched, and ends the streams of sessions that are gone
   * without a `turn.cancelled` having come (its client reconnects and gets 404).
   */
  private async refreshWatches(): Promise<void> {
    const groups = [...this.groups.values()];
    if (groups.length === 0) return;
    const session = sessionKeys(this.options.prefix).session;
    const pipeline = this.options.redis.pipeline();
    for (const group of groups) {
      pipeline.set(this.keys.watch(group.sessionId), '1', 'PX', this.watchTtlMs).exists(session(group.sessionId));
    }
    const results = await pipeline.exec().catch(() => null);
    groups.forEach((group, i) => {
      if (results?.[2 * i + 1]?.[1] === 0) for (const client of [...group.clients]) this.end(group, client);
    });
  }

  /** A client that does not keep up: its connection is cut; it resumes by id. */
  private drop(group: Group, client: Client): void {
    this.end(group, client);
    client.res.destroy();
  }

  private end(group: Group, client: Client): void {
    if (client.ended) return;
    client.ended = true;
    client.stopListening();
    group.clients.delete(client);
    if (group.clients.size === 0 && this.groups.get(group.sessionId) === group) {
      this.groups.delete(group.sessionId);
      this.byKey.delete(group.key);
    }
    if (!client.res.writableEnded) client.res.end();
  }
}

const TURN_ENDS = new Set(['turn.completed', 'turn.failed', 'turn.cancelled']);

function isTurnEnd(type: string): boolean {
  return TURN_ENDS.has(type);
}

function toEntry([id, fields]: [string, string[]]): Entry {
  const entry: Entry = { id, type: '', org: '', previous: '', json: '' };
  for (let i = 0; i < fields.length; i += 2) {
    const value = fields[i + 1] ?? '';
    switch (fields[i]) {
      case 'y':
        entry.type = value;
        break;
      case 'o':
        entry.org = value;
        break;
      case 'p':
        entry.previous = value;
        break;
      case 'e':
        entry.json = value;
        break;
    }
  }
  return entry;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
