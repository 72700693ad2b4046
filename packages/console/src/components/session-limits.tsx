import type { Organization, SessionLimits } from '@tollway/contracts';
import { formatInteger } from '../format';
import { Field, numberValue, type FieldErrors } from './form';

/** A session limit as people read it: its number, or "service default" for null. */
export function limitText(limit: number | null): string {
  return limit === null ? 'service default' : formatInteger(limit);
}

/** The dialog's text for each limit: its number, or empty for the service default. */
export type SessionLimitValues = Record<keyof SessionLimits, string>;

/** The inputs' text for an organization's limits. */
export function sessionLimitValues(limits: SessionLimits): SessionLimitValues {
  const text = (limit: number | null) => (limit === null ? '' : String(limit));
  return {
    sessions: text(limits.sessions),
    running_turns: text(limits.running_turns),
    waiting_turns: text(limits.waiting_turns),
    weight: text(limits.weight),
  };
}

/** The inputs' text as the API's `session_limits`: an empty input is null (the service default). */
export function sessionLimitsBody(values: SessionLimitValues): Record<keyof SessionLimits, number | string | null> {
  const value = (text: string) => numberValue(text) ?? null;
  return {
    sessions: value(values.sessions),
    running_turns: value(values.running_turns),
    waiting_turns: value(values.waiting_turns),
    weight: value(values.weight),
  };
}

/** The error keys (the API's `param`) of the four limits. */
export const SESSION_LIMIT_FIELDS = [
  'session_limits.sessions',
  'session_limits.running_turns',
  'session_limits.waiting_turns',
  'session_limits.weight',
];

const LABELS: Array<[keyof SessionLimits, string, string]> = [
  ['sessions', 'Sessions held at most', 'max-sessions'],
  ['running_turns', 'Turns running at once', 'max-running-turns'],
  ['waiting_turns', 'Turns waiting at most', 'max-waiting-turns'],
  ['weight', 'Turn weight (1-1000)', 'turn-weight'],
];

/** The four limit inputs of the edit dialog; empty means the session service's default. */
export function SessionLimitFields(props: {
  values: SessionLimitValues;
  set: (field: keyof SessionLimits) => (value: string) => void;
  errors: FieldErrors;
}) {
  return (
    <fieldset class="limits">
      <legend>Session limits</legend>
      <p class="hint">Enforced by the session service. Leave a limit empty for its configured default.</p>
      {LABELS.map(([name, label, id]) => (
        <Field
          key={name}
          id={id}
          label={label}
          inputMode="numeric"
          placeholder="service default"
          value={props.values[name]}
          onValue={props.set(name)}
          error={props.errors[`session_limits.${name}`]}
        />
      ))}
    </fieldset>
  );
}

/**
 * An organization's live sessions and turns against its limits, read-only: what an organization
 * admin may see of them, and the operator too.
 */
export function SessionsPanel({ org }: { org: Organization }) {
  const limits = org.session_limits;
  const turns = org.turns;
  const count = (value: number | undefined) => (value === undefined ? '—' : formatInteger(value));
  const items: Array<[string, string, string, string]> = [
    ['Sessions held', count(turns?.sessions), `limit ${limitText(limits.sessions)}`, 'turns-sessions'],
    ['Turns running', count(turns?.running), `limit ${limitText(limits.running_turns)}`, 'turns-running'],
    ['Turns waiting', count(turns?.waiting), `limit ${limitText(limits.waiting_turns)}`, 'turns-waiting'],
    ['Turn weight', limitText(limits.weight), 'share of dispatch while others wait', 'turn-weight'],
  ];
  return (
    <section aria-labelledby="sessions-title" class="totals">
      <h2 id="sessions-title">Sessions and turns</h2>
      <dl>
        {items.map(([term, value, sub, testId]) => (
          <div key={term}>
            <dt>{term}</dt>
            <dd data-testid={testId}>{value}</dd>
            <dd class="sub">{sub}</dd>
          </div>
        ))}
      </dl>
      <p class="hint">
        Now, on the session service, which enforces these limits; “service default” is its configured default. Refreshed
        with the usage below.
      </p>
    </section>
  );
}
