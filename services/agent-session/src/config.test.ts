import { defaultSweepIntervalMs, loadApiConfig } from './config';

describe('loadApiConfig', () => {
  it('applies the documented defaults', () => {
    expect(loadApiConfig({ env: {}, argv: [] })).toEqual({
      redisUrl: 'redis://127.0.0.1:6379',
      redisSentinelTls: false,
      redisWaitTimeoutMs: 250,
      redisPrefix: 'tollway:',
      logLevel: 'info',
      eventLogMaxEntries: 10_000,
      eventLogRetentionMs: 600_000,
      port: 8081,
      host: '0.0.0.0',
      ttlSeconds: 0,
      sweepIntervalMs: 250,
      maxSessions: 10_000,
      allowCustomIds: false,
      authEnabled: true,
      embeddedWorker: false,
      maxBodyBytes: 10 * 1024 * 1024,
      maxHistoryBytes: 4 * 1024 * 1024,
      metricsEnabled: true,
      metricsHost: '0.0.0.0',
      otelSdkDisabled: false,
      maxJsonDepth: 64,
      eventsHeartbeatMs: 15_000,
      eventsReaderBufferBytes: 1_048_576,
      eventsMaxStreamsPerOrg: 1000,
      orgMaxSessions: 0,
      orgMaxRunningTurns: 0,
      orgMaxWaitingTurns: 0,
      orgTurnWeight: 1,
      maxHeaderBytes: 16_384,
      maxHeadersCount: 100,
      headersTimeoutMs: 20_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 65_000,
      maxConnections: 10_000,
    });
  });

  it('reads the telemetry settings: METRICS_PORT, METRICS_ENABLED and the standard OTEL_* variables', () => {
    const config = loadApiConfig({
      env: { METRICS_PORT: '9464', METRICS_ENABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' },
      argv: [],
    });
    expect(config).toMatchObject({
      metricsPort: 9464,
      metricsEnabled: false,
      otelExporterOtlpEndpoint: 'http://collector:4318',
    });
    expect(() => loadApiConfig({ env: { METRICS_PORT: '70000' }, argv: [] })).toThrow(/METRICS_PORT/);
  });

  it('reads the connection limits from their environment variables', () => {
    const config = loadApiConfig({
      env: { HTTP_MAX_CONNECTIONS: '12', HTTP_HEADERS_TIMEOUT_MS: '1500', SESSIONS_MAX_JSON_DEPTH: '9' },
      argv: [],
    });
    expect(config).toMatchObject({ maxConnections: 12, headersTimeoutMs: 1500, maxJsonDepth: 9 });
    expect(() => loadApiConfig({ env: { HTTP_MAX_CONNECTIONS: '0' }, argv: [] })).toThrow(/HTTP_MAX_CONNECTIONS/);
  });

  it('reads the spec-named flags and their environment variables', () => {
    const config = loadApiConfig({
      env: { SESSION_TTL_SECONDS: '30', MAX_SESSIONS: '5', SESSIONS_PORT: '9000' },
      argv: ['--ttl', '2', '--max-sessions=7', '--allow-custom-ids', '--no-auth', '--embedded-worker'],
    });
    expect(config).toMatchObject({
      ttlSeconds: 2,
      sweepIntervalMs: 500,
      maxSessions: 7,
      port: 9000,
      allowCustomIds: true,
      authEnabled: false,
      embeddedWorker: true,
    });
    expect(loadApiConfig({ env: { SESSIONS_AUTH: 'false' }, argv: [] }).authEnabled).toBe(false);
  });

  it('refuses bad values, naming the option', () => {
    expect(() => loadApiConfig({ env: {}, argv: ['--max-sessions', '0'] })).toThrow(/MAX_SESSIONS \(--max-sessions\)/);
    expect(() => loadApiConfig({ env: { SESSION_TTL_SECONDS: '-1' }, argv: [] })).toThrow(/SESSION_TTL_SECONDS/);
    expect(() => loadApiConfig({ env: { SESSION_SWEEP_INTERVAL_MS: '3000000000' }, argv: [] })).toThrow(
      /SESSION_SWEEP_INTERVAL_MS \(--sweep-interval-ms\): must be at most 2147483647 ms/,
    );
    expect(() => loadApiConfig({ env: { HTTP_KEEP_ALIVE_TIMEOUT_MS: '2147483648' }, argv: [] })).toThrow(
      /HTTP_KEEP_ALIVE_TIMEOUT_MS/,
    );
  });

  it('derives the sweep interval from the TTL, clamped to 250–5000 ms', () => {
    expect(defaultSweepIntervalMs(0.5)).toBe(250);
    expect(defaultSweepIntervalMs(4)).toBe(1000);
    expect(defaultSweepIntervalMs(3600)).toBe(5000);
  });
});
