import { hash, timingSafeEqual } from 'node:crypto';
import type { Authenticator, Principal } from './admission.types';

/**
 * Accepts the API keys listed in configuration (`API_KEYS`). Keys are held and compared as
 * SHA-256 digests in constant time, against every configured key, so neither timing nor an
 * early exit tells how close a guess was. All keys belong to one organization, `config`.
 */
export class ConfigKeyAuthenticator implements Authenticator {
  private readonly digests: Buffer[];

  /** `kind` names the key ids it mints: `config-key-<n>` (API_KEYS), `service-key-<n>` (SERVICE_API_KEYS). */
  constructor(
    keys: readonly string[],
    private readonly kind: 'config' | 'service' = 'config',
  ) {
    this.digests = keys.map(digest);
  }

  async authenticate(bearerToken: string | undefined): Promise<Principal | null> {
    if (!bearerToken) return null;
    const candidate = digest(bearerToken);
    let found = -1;
    for (let i = 0; i < this.digests.length; i++) {
      if (timingSafeEqual(candidate, this.digests[i] as Buffer) && found === -1) found = i;
    }
    return found === -1 ? null : { orgId: 'config', keyId: `${this.kind}-key-${found}` };
  }
}

function digest(key: string): Buffer {
  // One-shot hash: a third of createHash's cost, and this runs on every request.
  return hash('sha256', key, 'buffer');
}
