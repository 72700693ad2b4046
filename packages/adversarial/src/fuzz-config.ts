/** Settings of an adversarial run, from the environment (the bench's flags override them). */
export interface FuzzConfig {
  /** FUZZ_SEED: the run's seed; default a fresh one, printed so the run can be replayed. */
  seed: number;
  /** FUZZ_PATH: a fast-check path printed by a failed run, to replay just its counterexample. */
  path: string | undefined;
  /** FUZZ_CASES: cases per service in the jest profile; default 500. */
  casesPerService: number;
  /** FUZZ_TIME_LIMIT_MS: the jest profile stops drawing new cases after this long; default 30 000. */
  timeLimitMs: number;
  /** FUZZ_RSS_LIMIT_MB: highest RSS either service may reach; default 400. */
  rssLimitBytes: number;
  /** FUZZ_PREFIX: base of the Redis key prefix (a random part is added); default `adversarial-`. */
  prefixBase: string;
  /** REDIS_URL: default `redis://127.0.0.1:6379`. */
  redisUrl: string;
  /** The environment the spawned services inherit under their own settings. */
  serviceEnv: Readonly<NodeJS.ProcessEnv>;
}

function int(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got "${raw}"`);
  return value;
}

/** Reads the run's settings once. */
export function loadFuzzConfig(env: NodeJS.ProcessEnv = process.env): FuzzConfig {
  return Object.freeze({
    seed: int('FUZZ_SEED', env.FUZZ_SEED, Math.floor(Math.random() * 2 ** 31)),
    path: env.FUZZ_PATH || undefined,
    casesPerService: int('FUZZ_CASES', env.FUZZ_CASES, 500),
    timeLimitMs: int('FUZZ_TIME_LIMIT_MS', env.FUZZ_TIME_LIMIT_MS, 30_000),
    rssLimitBytes: int('FUZZ_RSS_LIMIT_MB', env.FUZZ_RSS_LIMIT_MB, 400) * 2 ** 20,
    prefixBase: env.FUZZ_PREFIX || 'adversarial-',
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    serviceEnv: { ...env },
  });
}
