import { Redis } from 'ioredis';
import { createLogger, ServiceError } from '@tollway/service-kit';
import { wireAccounts } from '../../src/admission/accounts-wiring';
import { loadGatewayConfig } from '../../src/config';

/** Redis unreachable: authentication and admission answer 503 (retryable), never 401 or 500. */
describe('admission with Redis down', () => {
  it('turns Redis failures into 503 admission_unavailable', async () => {
    // Port 1 refuses connections; no offline queue, so commands fail at once.
    const redis = new Redis('redis://127.0.0.1:1', {
      enableOfflineQueue: false,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    redis.on('error', () => undefined);
    const config = loadGatewayConfig({ env: { REDIS_PREFIX: 'test-down:' }, argv: [] });
    const wiring = await wireAccounts(config, redis, createLogger({ service: 'test', silent: true }));
    try {
      const authError = await wiring.authenticator.authenticate(`tw-${'k'.repeat(43)}`).catch((err: unknown) => err);
      expect(authError).toBeInstanceOf(ServiceError);
      expect(authError).toMatchObject({ status: 503, code: 'admission_unavailable' });
      expect((authError as ServiceError).headers['x-should-retry']).toBe('true');

      const admitError = await wiring.admission
        .admit({
          principal: { orgId: 'o', keyId: 'k' },
          modelId: 'a/b',
          inputTokens: 1,
          reservedOutputTokens: 1,
          capacity: 1,
          pricePerMillion: { input: 1, output: 1 },
        })
        .catch((err: unknown) => err);
      expect(admitError).toMatchObject({ status: 503, code: 'admission_unavailable' });
    } finally {
      await wiring.close();
      redis.disconnect();
    }
  });
});
