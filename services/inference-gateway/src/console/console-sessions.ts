import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';

/** Who a console session belongs to. */
export type ConsoleSessionRole = 'operator' | 'organization_admin';

/** A console session as stored in Redis. */
export interface ConsoleSessionRecord {
  id: string;
  role: ConsoleSessionRole;
  /** The organization of an organization admin; null for the operator. */
  orgId: string | null;
  /** The admin key an organization admin signed in with (its revocation ends the session); null for the operator. */
  keyId: string | null;
  /**
   * HMAC of the ADMIN_TOKEN the operator signed in with (another token ends the session); null for
   * an organization admin. Never the token itself.
   */
  adminTokenDigest: string | null;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** Options of ConsoleSessions. */
export interface ConsoleSessionsOptions {
  redis: Redis;
  /** Redis key prefix, e.g. `tollway:`. */
  prefix: string;
  /** HMAC key for the cookie's signature and the CSRF token. */
  secret: string;
  /** `ADMIN_TOKEN`: operator sessions last only while it does. */
  adminToken: string;
  /** Session lifetime, ms. */
  ttlMs: number;
  now?: () => number;
}

const SESSION_ID = /^[A-Za-z0-9_-]{32}$/;

/**
 * Console sessions: a random id in Redis (so sign-out and revocation end a session on every
 * replica) carried in a cookie as `<id>.<HMAC(id)>`, so a forged or altered cookie is refused
 * without a Redis call. The CSRF token is HMAC("csrf:" + id): the page reads it from the session
 * endpoint (same-origin only) and sends it back as a header, which a cross-site form cannot do.
 * An operator session holds an HMAC of the admin token it signed in with and is live only while
 * that is the current token: rotating a leaked token ends the sessions opened with it, even when
 * CONSOLE_SESSION_SECRET (and so every cookie's signature) stays the same.
 */
export class ConsoleSessions {
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly secret: string;
  private readonly adminTokenDigest: string;
  readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: ConsoleSessionsOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.secret = options.secret;
    this.adminTokenDigest = this.sign(`admin-token:${options.adminToken}`);
    this.ttlMs = options.ttlMs;
    this.now = options.now ?? Date.now;
  }

  /** Starts a session; returns it and the cookie value that names it. */
  async create(
    role: ConsoleSessionRole,
    orgId: string | null,
    keyId: string | null,
  ): Promise<{ record: ConsoleSessionRecord; cookie: string }> {
    const id = randomBytes(24).toString('base64url');
    const adminTokenDigest = role === 'operator' ? this.adminTokenDigest : null;
    const record: ConsoleSessionRecord = {
      id,
      role,
      orgId,
      keyId,
      adminTokenDigest,
      expiresAt: this.now() + this.ttlMs,
    };
    await this.redis.set(this.key(id), JSON.stringify(record), 'PX', this.ttlMs);
    return { record, cookie: `${id}.${this.sign(id)}` };
  }

  /**
   * The live session a cookie value names, or null (unsigned, altered, expired, signed out, or an
   * operator's opened with another admin token). A session of another token is left in Redis to
   * expire: during a rolling restart a replica still on the old token must not destroy the
   * sessions opened with the new one.
   */
  async read(cookie: string | undefined): Promise<ConsoleSessionRecord | null> {
    const id = this.verify(cookie);
    if (!id) return null;
    const raw = await this.redis.get(this.key(id));
    if (!raw) return null;
    const record = JSON.parse(raw) as ConsoleSessionRecord;
    if (record.expiresAt <= this.now()) return null;
    if (record.role === 'operator' && !sameText(record.adminTokenDigest ?? '', this.adminTokenDigest)) return null;
    return record;
  }

  /** Ends a session (sign-out). */
  async destroy(id: string): Promise<void> {
    await this.redis.del(this.key(id));
  }

  /** The CSRF token of a session. */
  csrfToken(record: ConsoleSessionRecord): string {
    return this.sign(`csrf:${record.id}`);
  }

  /** True when `header` is the session's CSRF token (constant-time). */
  checkCsrf(record: ConsoleSessionRecord, header: string | undefined): boolean {
    return typeof header === 'string' && sameText(header, this.csrfToken(record));
  }

  private verify(cookie: string | undefined): string | null {
    if (!cookie) return null;
    const dot = cookie.indexOf('.');
    const id = cookie.slice(0, dot);
    if (dot === -1 || !SESSION_ID.test(id)) return null;
    return sameText(cookie.slice(dot + 1), this.sign(id)) ? id : null;
  }

  private sign(value: string): string {
    return createHmac('sha256', this.secret).update(value).digest('base64url');
  }

  private key(id: string): string {
    return `${this.prefix}console:session:${id}`;
  }
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
