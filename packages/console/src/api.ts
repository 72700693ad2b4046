import type {
  ApiKey,
  ApiKeyList,
  ConsoleSession,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  DeletedOrganization,
  ModelStatusList,
  Organization,
  OrganizationList,
  OrganizationUsage,
  UpdateOrganizationRequest,
} from '@tollway/contracts';

/** An answer other than 2xx, carrying the API's own error message and `param`. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Called when any call answers 401: the session ended (signed out elsewhere, expired, key revoked). */
let onSignedOut: () => void = () => undefined;
let csrfToken = '';

/** Registers the handler of an ended session. */
export function whenSignedOut(handler: () => void): void {
  onSignedOut = handler;
}

/** Remembers the session's CSRF token, sent on every state-changing call. */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError('The gateway cannot be reached. Check your connection and try again.', 0);
  }
  if (response.status === 204) return undefined as T;
  const payload = (await response.json().catch(() => null)) as {
    error?: { message?: string; param?: string | null };
  } | null;
  if (!response.ok) {
    const error = payload?.error;
    const failure = new ApiError(
      error?.message ?? `The gateway answered ${response.status}.`,
      response.status,
      error?.param ?? null,
    );
    if (response.status === 401 && !path.endsWith('/console/api/session')) onSignedOut();
    throw failure;
  }
  return payload as T;
}

const ADMIN = '/admin/v1';
const org = (id: string) => `${ADMIN}/organizations/${encodeURIComponent(id)}`;

/** The console's calls: its session API and the admin API. */
export const api = {
  session: () => call<ConsoleSession>('GET', '/console/api/session'),
  signIn: (token: string) => call<ConsoleSession>('POST', '/console/api/session', { token }),
  signOut: () => call<void>('DELETE', '/console/api/session'),

  organizations: () => call<OrganizationList>('GET', `${ADMIN}/organizations`),
  organization: (id: string) => call<Organization>('GET', org(id)),
  createOrganization: (body: CreateOrganizationRequest) => call<Organization>('POST', `${ADMIN}/organizations`, body),
  updateOrganization: (id: string, body: UpdateOrganizationRequest) => call<Organization>('PATCH', org(id), body),
  deleteOrganization: (id: string) => call<DeletedOrganization>('DELETE', org(id)),

  keys: (id: string) => call<ApiKeyList>('GET', `${org(id)}/keys`),
  createKey: (id: string, body: CreateApiKeyRequest) => call<CreatedApiKey>('POST', `${org(id)}/keys`, body),
  revokeKey: (id: string, keyId: string) => call<ApiKey>('DELETE', `${org(id)}/keys/${encodeURIComponent(keyId)}`),

  usage: (id: string) => call<OrganizationUsage>('GET', `${org(id)}/usage?minutes=60`),
  models: () => call<ModelStatusList>('GET', `${ADMIN}/models`),
};
