import { z } from 'zod';

/** Thrown when the environment or flags do not fit a service's config schema. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** How one config field is read: its environment variable and, optionally, its command-line flag. */
export interface ConfigSource {
  env: string;
  /** Flag name without dashes, e.g. `max-sessions` for `--max-sessions 10` or `--max-sessions=10`. */
  flag?: string;
  /** A flag that takes no value (`--allow-custom-ids`) reads as `true`. */
  boolean?: boolean;
}

/**
 * Parses config once: each field of `schema` is read from its flag (first) or environment
 * variable, then validated. A bad or missing value throws a ConfigError naming the variable.
 * The result is frozen.
 */
export function loadConfig<S extends z.ZodObject>(
  schema: S,
  sources: { [K in keyof z.infer<S>]: ConfigSource },
  input: { env?: NodeJS.ProcessEnv; argv?: readonly string[] } = {},
): Readonly<z.infer<S>> {
  const env = input.env ?? process.env;
  const argv = input.argv ?? process.argv.slice(2);
  const flags = parseFlags(argv, sources as Record<string, ConfigSource>);
  const raw: Record<string, unknown> = {};
  const problems: string[] = [];
  const nameOf = (key: string) => {
    const source = (sources as Record<string, ConfigSource>)[key];
    return source ? (source.flag ? `${source.env} (--${source.flag})` : source.env) : key;
  };
  for (const [key, source] of Object.entries(sources as Record<string, ConfigSource>)) {
    const value = source.flag !== undefined && flags.has(source.flag) ? flags.get(source.flag) : env[source.env];
    if (value === undefined || value === '') continue;
    // Blanks are refused, not trimmed: a number of blanks coerces to 0 (a random port, no
    // timeout), and a token with blanks never matches what an HTTP header carries.
    if (value.trim() !== value) problems.push(`${nameOf(key)}: must not start or end with blanks`);
    else raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) problems.push(`${nameOf(String(issue.path[0] ?? ''))}: ${issue.message}`);
  }
  if (problems.length > 0 || !parsed.success) {
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  return Object.freeze(parsed.data);
}

function parseFlags(argv: readonly string[], sources: Record<string, ConfigSource>): Map<string, string> {
  const known = new Map<string, ConfigSource>();
  for (const source of Object.values(sources)) if (source.flag) known.set(source.flag, source);
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    // `pnpm run <script> -- --flag` passes the separator through; it carries no option.
    if (arg === '--') continue;
    if (!arg.startsWith('--')) throw new ConfigError(`Unexpected argument "${arg}"`);
    const [name, inline] = splitFlag(arg.slice(2));
    const source = known.get(name);
    if (!source) throw new ConfigError(`Unknown option --${name}`);
    // `--port=` is a value left out, not "the default" (an empty variable is read as unset).
    if (inline === '') throw new ConfigError(`Option --${name} needs a value`);
    if (inline !== undefined) flags.set(name, inline);
    else if (source.boolean) flags.set(name, 'true');
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new ConfigError(`Option --${name} needs a value`);
      flags.set(name, next);
      i++;
    }
  }
  return flags;
}

function splitFlag(flag: string): [string, string | undefined] {
  const eq = flag.indexOf('=');
  return eq === -1 ? [flag, undefined] : [flag.slice(0, eq), flag.slice(eq + 1)];
}

/** The longest delay a Node timer can wait, ms (2^31 - 1, about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration setting in whole ms, from `min` to MAX_TIMER_MS. Each one ends up in a timer, and Node
 * runs a timer of more than MAX_TIMER_MS after 1 ms, with only a warning: a 35-day turn timeout
 * would fail every turn at once, and a 35-day sweep interval would sweep every millisecond.
 */
export function durationMs(min: number) {
  return z.coerce
    .number()
    .int()
    .min(min)
    .max(MAX_TIMER_MS, { message: `must be at most ${MAX_TIMER_MS} ms (about 24.8 days), the longest a timer waits` });
}

/**
 * A TCP port, 0 (any free port) to 65535, written in decimal digits. `Number()` reads `0x50` as
 * 80 and `8e3` as 8000: a listener on a port the setting does not show.
 */
export const portNumber = z
  .union([z.number(), z.string().regex(/^[0-9]+$/, { message: 'must be a port number in decimal digits' })])
  .transform(Number)
  .pipe(z.number().int().min(0).max(65535));

/** A boolean read from the environment: `true/false/1/0/yes/no`, anything else is an error. */
export const envBoolean = z
  .union([z.boolean(), z.enum(['true', 'false', '1', '0', 'yes', 'no'])])
  .transform((value) => value === true || value === 'true' || value === '1' || value === 'yes');
