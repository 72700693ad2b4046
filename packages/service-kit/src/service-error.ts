/** Fields of the spec's error envelope plus what an HTTP response needs around it. */
export interface ServiceErrorInit {
  status: number;
  message: string;
  /** `error.type`; `invalid_request_error` unless the spec names another. */
  type?: string;
  /** `error.code`; `undefined` leaves the field out entirely (the 401 rule). */
  code?: string | null;
  param?: string | null;
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * The one error type the services throw for answers that are not 200. The error middleware
 * writes it as `{ error: { message, type, param, code } }` with its status and headers.
 */
export class ServiceError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null | undefined;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(init: ServiceErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'ServiceError';
    this.status = init.status;
    this.type = init.type ?? 'invalid_request_error';
    this.code = init.code;
    this.param = init.param ?? null;
    this.headers = init.headers ?? {};
  }

  /** The envelope body; `code` is omitted when it was never set. */
  toBody(): { error: { message: string; type: string; param: string | null; code?: string | null } } {
    const error: { message: string; type: string; param: string | null; code?: string | null } = {
      message: this.message,
      type: this.type,
      param: this.param,
    };
    if (this.code !== undefined) error.code = this.code;
    return { error };
  }
}

/** Turns a Zod issue path into the `param` string clients expect: `messages[0].role`. */
export function formatIssuePath(path: ReadonlyArray<PropertyKey>): string | null {
  if (path.length === 0) return null;
  return path
    .map((part, index) => (typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`))
    .join('');
}
