import type { z } from 'zod';
import type { JSX } from 'preact';

/** Field errors by field path (`budgets.requests`); `_form` for the form as a whole. */
export type FieldErrors = Record<string, string>;

/**
 * Validates `value` with the API's own Zod schema (from @tollway/contracts): the data on success,
 * otherwise the first message per field, keyed like the API's `param`.
 */
export function validate<S extends z.ZodType>(
  schema: S,
  value: unknown,
): { ok: true; data: z.output<S> } | { ok: false; errors: FieldErrors } {
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, data: result.data };
  const errors: FieldErrors = {};
  for (const issue of result.error.issues) {
    const path = issue.path.map(String).join('.') || '_form';
    errors[path] ??= issue.message;
  }
  return { ok: false, errors };
}

/** Maps an API error's `param` (`budgets.requests`, `credit_top_up`) onto a field, or the whole form. */
export function apiErrorField(param: string | null, fields: readonly string[]): string {
  return param && fields.includes(param) ? param : '_form';
}

/** Reads a number input: a number, or the raw text so the schema reports it. */
export function numberValue(text: string): number | string | undefined {
  if (text.trim() === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : text;
}

interface FieldProps extends Omit<JSX.InputHTMLAttributes<HTMLInputElement>, 'id' | 'value' | 'onInput'> {
  id: string;
  label: string;
  value: string;
  onValue: (value: string) => void;
  error?: string;
  hint?: string;
}

/** A labelled input whose error is tied to it (aria-invalid, aria-describedby). */
export function Field({ id, label, value, onValue, error, hint, ...rest }: FieldProps) {
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {hint && (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      <input
        id={id}
        name={id}
        value={value}
        onInput={(event) => onValue((event.target as HTMLInputElement).value)}
        aria-invalid={error ? 'true' : undefined}
        aria-describedby={described || undefined}
        {...rest}
      />
      {error && (
        <p class="field-error" id={`${id}-error`}>
          {error}
        </p>
      )}
    </div>
  );
}

/** The error of a form as a whole, announced when it appears. */
export function FormError({ message }: { message?: string }) {
  if (!message) return null;
  return (
    <p class="form-error" role="alert">
      {message}
    </p>
  );
}

/** The three per-minute budget inputs, as the create form and the edit dialog both show them. */
export function BudgetFields(props: {
  /** Prefix of the inputs' ids (`''` gives `requests`, `input-tokens`, `output-tokens`). */
  idPrefix: string;
  values: { requests: string; input: string; output: string };
  set: (field: 'requests' | 'input' | 'output') => (value: string) => void;
  errors: FieldErrors;
}) {
  const { idPrefix, values, set, errors } = props;
  return (
    <>
      <Field
        id={`${idPrefix}requests`}
        label="Requests per minute"
        inputMode="numeric"
        value={values.requests}
        onValue={set('requests')}
        error={errors['budgets.requests']}
      />
      <Field
        id={`${idPrefix}input-tokens`}
        label="Input tokens per minute"
        inputMode="numeric"
        value={values.input}
        onValue={set('input')}
        error={errors['budgets.input_tokens']}
      />
      <Field
        id={`${idPrefix}output-tokens`}
        label="Output tokens per minute"
        inputMode="numeric"
        value={values.output}
        onValue={set('output')}
        error={errors['budgets.output_tokens']}
      />
    </>
  );
}
