import {
  CreateApiKeyRequest,
  CreateChatCompletionRequest,
  CreateOrganizationRequest,
  CreateSessionRequest,
  MessageRequest,
  UpdateOrganizationRequest,
} from '@tollway/contracts';
import { toJsonBytes, type JsonNode, type RefValues } from './hostile-json';

/** What this oracle needs of a Zod schema. */
interface BodySchema {
  safeParse(value: unknown): { success: boolean };
}

/** The contract schema of each endpoint template that takes a body (by template method and first path segments). */
function schemaFor(service: string, method: string, segments: readonly string[]): BodySchema | null {
  const path = segments.join('/');
  if (service === 'gateway') {
    if (method === 'POST' && path === 'v1/chat/completions') return CreateChatCompletionRequest;
    if (method === 'POST' && path === 'admin/v1/organizations') return CreateOrganizationRequest;
    if (method === 'PATCH' && /^admin\/v1\/organizations\/[^/]+$/.test(path)) return UpdateOrganizationRequest;
    if (method === 'POST' && /^admin\/v1\/organizations\/[^/]+\/keys$/.test(path)) return CreateApiKeyRequest;
    return null;
  }
  if ((method === 'POST' && path === 'sessions') || (method === 'PUT' && segments.length === 2))
    return CreateSessionRequest;
  if (method === 'POST' && /^sessions\/[^/]+\/messages$/.test(path)) return MessageRequest;
  return null;
}

/** Refs as a valid request would carry them; only their validity matters to a schema. */
const SAMPLE_REFS: RefValues = {
  sessionId: '00000000-0000-4000-8000-000000000000',
  webhookUrl: 'http://127.0.0.1:9/hook',
  orgId: 'org',
  victimOrgId: 'org',
  victimKeyId: 'key',
  hostileModel: 'hostile/huge-json',
};

/**
 * True when the body, as the service will read it, is not JSON or breaks the endpoint's contract
 * schema (the one the services validate with): such a request can only be refused, so a 2xx is a
 * finding. False when the endpoint has no body schema or the body cannot be judged here.
 */
export function breaksContract(
  service: string,
  method: string,
  segments: readonly string[],
  body: JsonNode | Uint8Array,
): boolean {
  const schema = schemaFor(service, method, segments);
  if (!schema) return false;
  const bytes = body instanceof Uint8Array ? Buffer.from(body) : toJsonBytes(body, SAMPLE_REFS);
  let parsed: unknown;
  try {
    parsed = bytes.length === 0 ? {} : JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    // Too deep for this process's parser says nothing about the body's validity.
    return !(err instanceof RangeError);
  }
  try {
    return !schema.safeParse(parsed).success;
  } catch {
    return false;
  }
}
