import { UpdateOrganizationRequest, type Organization } from '@tollway/contracts';
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { Dialog } from '../components/dialog';
import {
  apiErrorField,
  BudgetFields,
  Field,
  FormError,
  numberValue,
  validate,
  type FieldErrors,
} from '../components/form';
import {
  SESSION_LIMIT_FIELDS,
  SessionLimitFields,
  sessionLimitsBody,
  sessionLimitValues,
  type SessionLimitValues,
} from '../components/session-limits';
import { formatUsd } from '../format';

/** Sends an UpdateOrganizationRequest checked with the API's schema; errors land on their field. */
function useUpdate(org: Organization, fields: readonly string[], onSaved: (org: Organization) => void) {
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const save = async (body: unknown) => {
    const checked = validate(UpdateOrganizationRequest, body);
    if (!checked.ok) return setErrors(checked.errors);
    setBusy(true);
    setErrors({});
    try {
      onSaved(await api.updateOrganization(org.id, checked.data));
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError('Saving failed.', 0);
      setErrors({ [apiErrorField(e.param, fields)]: e.message });
      setBusy(false);
    }
  };
  return { errors, busy, save };
}

/**
 * Edits an organization's name, per-minute budgets and session limits (operator-only: the session
 * service enforces the limits; an empty one is its default).
 */
export function BudgetsDialog(props: { org: Organization; onClose: () => void; onSaved: (org: Organization) => void }) {
  const { org } = props;
  const [values, setValues] = useState({
    name: org.name,
    requests: String(org.budgets.requests),
    input: String(org.budgets.input_tokens),
    output: String(org.budgets.output_tokens),
  });
  const [limits, setLimits] = useState(sessionLimitValues(org.session_limits));
  const fields = ['name', 'budgets.requests', 'budgets.input_tokens', 'budgets.output_tokens', ...SESSION_LIMIT_FIELDS];
  const { errors, busy, save } = useUpdate(org, fields, props.onSaved);
  const set = (field: keyof typeof values) => (value: string) => setValues({ ...values, [field]: value });
  const setLimit = (field: keyof SessionLimitValues) => (value: string) => setLimits({ ...limits, [field]: value });
  const submit = (event: Event) => {
    event.preventDefault();
    void save({
      name: values.name,
      budgets: {
        requests: numberValue(values.requests),
        input_tokens: numberValue(values.input),
        output_tokens: numberValue(values.output),
      },
      session_limits: sessionLimitsBody(limits),
    });
  };
  return (
    <Dialog title="Edit budgets and limits" onClose={props.onClose}>
      <form onSubmit={submit} noValidate>
        <Field id="edit-name" label="Name" value={values.name} onValue={set('name')} error={errors.name} />
        <BudgetFields idPrefix="edit-" values={values} set={set} errors={errors} />
        <SessionLimitFields values={limits} set={setLimit} errors={errors} />
        <FormError message={errors._form ?? errors.session_limits} />
        <div class="actions">
          <button type="button" class="secondary" onClick={props.onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Save'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** Adds credit (USD) to an organization; a negative amount corrects it. */
export function TopUpDialog(props: { org: Organization; onClose: () => void; onSaved: (org: Organization) => void }) {
  const [amount, setAmount] = useState('');
  const { errors, busy, save } = useUpdate(props.org, ['credit_top_up'], props.onSaved);
  const submit = (event: Event) => {
    event.preventDefault();
    void save({ credit_top_up: numberValue(amount) ?? Number.NaN });
  };
  return (
    <Dialog title="Top up credit" onClose={props.onClose}>
      <form onSubmit={submit} noValidate>
        <p>
          {props.org.name} has {formatUsd(props.org.credit)}.
        </p>
        <Field
          id="top-up"
          label="Amount to add (USD)"
          hint="A negative amount corrects the balance downwards."
          inputMode="decimal"
          value={amount}
          onValue={setAmount}
          error={errors.credit_top_up}
          autoFocus
        />
        <FormError message={errors._form} />
        <div class="actions">
          <button type="button" class="secondary" onClick={props.onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" disabled={busy}>
            {busy ? 'Adding…' : 'Add credit'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
