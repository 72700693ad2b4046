import { existsSync } from 'node:fs';
import path from 'node:path';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { AccountStore } from '@tollway/accounts';
import { ConsoleSignInRequest, type ConsoleSession } from '@tollway/contracts';
import { jsonBody } from '@tollway/service-kit';
import { invalidAdminRequest } from '../routes/admin/admin-errors';
import {
  adminTokenMatcher,
  sessionCaller,
  tokenCaller,
  type AdminCaller,
  type AdminKeyResolver,
} from '../routes/admin/admin-access';
import { csrfRejected } from '../routes/admin/admin-errors';
import { consoleEndpointNotFound, notSignedIn, signInFailed, signInRateLimited } from './console-errors';
import type { ConsoleSessionRecord, ConsoleSessions } from './console-sessions';
import { clearSessionCookie, readSessionCookie, sameOrigin, writeSessionCookie } from './session-cookie';
import type { SignInLimiter } from './sign-in-limiter';

/** A sign-in body is one token: 4 KiB and a flat object, read by the same hardened reader as every route. */
const SIGN_IN_BODY_LIMITS = { maxBytes: 4096, maxDepth: 4 };

/** Where the gateway app mounts the console. */
export const CONSOLE_BASE_PATH = '/console';

/**
 * The console's Content-Security-Policy: only this origin's scripts, styles and API; no inline
 * script or style element, no other origin, no framing.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Options of buildConsoleRouter. */
export interface ConsoleRouterOptions {
  store: AccountStore;
  adminToken: string;
  keys: AdminKeyResolver;
  sessions: ConsoleSessions;
  limiter: SignInLimiter;
  /** The built console (`index.html`, `assets/`); null or missing = a 503 page saying to build it. */
  assetsDir: string | null;
}

/**
 * `/console`: the key-management console's static files and its session API
 * (`POST /console/api/session` signs in, `GET` tells who is signed in, `DELETE` signs out).
 * Everything else the page does goes through the admin API with the session cookie.
 */
export function buildConsoleRouter(options: ConsoleRouterOptions): Router {
  const router = Router();
  router.use(securityHeaders);
  router.use('/api', sessionApi(options));
  router.use('/api', (req, _res, next) => next(consoleEndpointNotFound(req.method, `/api${req.path}`)));
  const dir = options.assetsDir;
  if (!dir || !existsSync(path.join(dir, 'index.html'))) {
    router.use((_req, res) => {
      res.status(503).type('text/plain').send('The console is not built. Run `pnpm build` and restart the gateway.\n');
    });
    return router;
  }
  // Hashed file names change with their content, so they may be cached for good.
  router.use('/assets', express.static(path.join(dir, 'assets'), { immutable: true, maxAge: '365d', index: false }));
  // The page names the current assets, so it is never cached, under either of its names.
  const sendIndex = (res: Response, next: NextFunction) => {
    res.setHeader('cache-control', 'no-cache');
    // With `root`, send checks only the name for dot-segments: the Docker image's `pnpm deploy`
    // puts the console under node_modules/.pnpm/, and an absolute path through it was refused.
    res.sendFile('index.html', { root: dir }, (err) => err && next(err));
  };
  router.get('/', (req, res, next) => {
    // Relative asset URLs need the trailing slash.
    if (!req.originalUrl.split('?')[0]?.endsWith('/')) return res.redirect(301, `${CONSOLE_BASE_PATH}/`);
    sendIndex(res, next);
  });
  router.get('/index.html', (_req, res, next) => sendIndex(res, next));
  router.use(express.static(dir, { index: false, maxAge: '1h' }));
  router.use((req, _res, next) => next(consoleEndpointNotFound(req.method, req.path)));
  router.use(staticFileRefusals);
  return router;
}

/**
 * The answers of a file request that cannot be served as asked: a range past the end (416, with
 * the file's size in `content-range`) or a failed `If-Match` / `If-Unmodified-Since` (412). The
 * static file module reports them as errors with their status; left to the gateway's error
 * middleware they were 500s. Any other error goes on to it.
 */
function staticFileRefusals(err: unknown, _req: Request, res: Response, next: NextFunction): void {
  const refusal = err as { status?: unknown; headers?: unknown } | null;
  if (res.headersSent || (refusal?.status !== 412 && refusal?.status !== 416)) return next(err);
  if (refusal.headers && typeof refusal.headers === 'object') {
    for (const [name, value] of Object.entries(refusal.headers)) res.setHeader(name, String(value));
  }
  res.status(refusal.status).end();
}

function securityHeaders(_req: Request, res: Response, next: NextFunction): void {
  res.setHeader('content-security-policy', CONSOLE_CSP);
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('x-frame-options', 'DENY');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('cross-origin-opener-policy', 'same-origin');
  res.setHeader('cross-origin-resource-policy', 'same-origin');
  next();
}

function sessionApi(options: ConsoleRouterOptions): Router {
  const { sessions, limiter } = options;
  const isAdminToken = adminTokenMatcher(options.adminToken);
  const router = Router();
  const view = (record: ConsoleSessionRecord): ConsoleSession => ({
    object: 'console.session',
    role: record.role,
    organization_id: record.orgId,
    csrf_token: sessions.csrfToken(record),
    expires_at: Math.floor(record.expiresAt / 1000),
  });
  const noStore = (res: Response) => res.setHeader('cache-control', 'no-store');

  router.post('/session', jsonBody(SIGN_IN_BODY_LIMITS), async (req, res) => {
    // A cross-site page must not sign the browser in to an account of its choosing either.
    if (!sameOrigin(req)) throw csrfRejected();
    const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    const body = ConsoleSignInRequest.safeParse(req.body ?? {});
    if (!body.success) throw invalidAdminRequest(body.error);
    const waitMs = await limiter.attempt(address);
    if (waitMs > 0) throw signInRateLimited(waitMs);
    const caller: AdminCaller | null = await tokenCaller(body.data.token, isAdminToken, options.keys);
    if (!caller) throw signInFailed();
    await limiter.succeeded(address);
    const previous = await sessions.read(readSessionCookie(req));
    if (previous) await sessions.destroy(previous.id);
    const { record, cookie } =
      caller.role === 'operator'
        ? await sessions.create('operator', null, null)
        : await sessions.create('organization_admin', caller.orgId, caller.keyId);
    writeSessionCookie(req, res, cookie, sessions.ttlMs);
    noStore(res);
    res.status(201).json(view(record));
  });

  router.get('/session', async (req, res) => {
    const record = await sessions.read(readSessionCookie(req));
    if (!record || !(await sessionCaller(options.store, sessions, record))) throw notSignedIn();
    noStore(res);
    res.json(view(record));
  });

  router.delete('/session', async (req, res) => {
    const record = await sessions.read(readSessionCookie(req));
    if (record) {
      if (!sameOrigin(req) || !sessions.checkCsrf(record, req.get('x-csrf-token'))) throw csrfRejected();
      await sessions.destroy(record.id);
    }
    clearSessionCookie(req, res);
    res.status(204).end();
  });
  return router;
}
