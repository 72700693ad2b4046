import winston from 'winston';

export type Logger = winston.Logger;

/** Options of createLogger. */
export interface LoggerOptions {
  service: string;
  /** winston level; default `info`. */
  level?: string;
  /** Drop every record (tests that would otherwise flood the output). */
  silent?: boolean;
}

/** A JSON logger to stdout; every record carries `service`, and request records carry `request_id`. */
export function createLogger(options: LoggerOptions): Logger {
  return winston.createLogger({
    level: options.level ?? 'info',
    silent: options.silent ?? false,
    defaultMeta: { service: options.service },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console()],
  });
}
