import { CreateOrganizationRequest, type Organization } from '@tollway/contracts';
import type { RefObject } from 'preact';
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { announce } from '../announce';
import { ConfirmDialog } from '../components/dialog';
import {
  apiErrorField,
  BudgetFields,
  Field,
  FormError,
  numberValue,
  validate,
  type FieldErrors,
} from '../components/form';
import { Empty, ErrorNote, Loading, TableWrap } from '../components/status';
import { limitText } from '../components/session-limits';
import { formatInteger, formatTime, formatUsd } from '../format';
import { href } from '../router';
import { useResource } from '../use-resource';
import { BudgetsDialog, TopUpDialog } from './organization-dialogs';

type Action = { kind: 'budgets' | 'top-up' | 'delete'; org: Organization } | null;

/**
 * Operators: every organization with budgets, balances, credit, and its sessions and turns against
 * its session limits; create, edit (budgets and limits), top up, delete.
 */
export function OrganizationsPage({ heading }: { heading: RefObject<HTMLHeadingElement> }) {
  const orgs = useResource(() => api.organizations(), []);
  const [action, setAction] = useState<Action>(null);
  const [busy, setBusy] = useState(false);
  const [deleteError, setDeleteError] = useState<string>();
  const close = () => {
    setAction(null);
    setDeleteError(undefined);
  };
  const done = (message: string) => {
    close();
    announce(message);
    orgs.reload();
  };

  const remove = async (org: Organization) => {
    setBusy(true);
    try {
      await api.deleteOrganization(org.id);
      done(`Organization ${org.name} deleted`);
    } catch (err) {
      setDeleteError(err instanceof ApiError ? err.message : 'Deleting failed.');
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <h1 ref={heading} tabIndex={-1}>
        Organizations
      </h1>
      <CreateOrganizationForm onCreated={(org) => done(`Organization ${org.name} created`)} />
      <h2>All organizations</h2>
      {orgs.loading && !orgs.data && <Loading what="organizations" />}
      {orgs.error && <ErrorNote message={orgs.error} onRetry={orgs.reload} />}
      {orgs.data && orgs.data.data.length === 0 && <Empty>No organizations yet. Create the first one above.</Empty>}
      {orgs.data && orgs.data.data.length > 0 && (
        <TableWrap label="Organizations">
          <table>
            <thead>
              <tr>
                <th scope="col">Organization</th>
                <th scope="col">Requests / min</th>
                <th scope="col">Input tokens / min</th>
                <th scope="col">Output tokens / min</th>
                <th scope="col">Credit</th>
                <th scope="col">Sessions</th>
                <th scope="col">Turns</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {orgs.data.data.map((org) => (
                <tr key={org.id}>
                  <th scope="row">
                    <span class="name">{org.name}</span>
                    <span class="sub">
                      {org.id} · created {formatTime(org.created)}
                    </span>
                  </th>
                  {(['requests', 'input_tokens', 'output_tokens'] as const).map((kind) => (
                    <td key={kind}>
                      {formatInteger(org.balances?.[kind].remaining ?? org.budgets[kind])} left
                      <span class="sub">of {formatInteger(org.budgets[kind])}</span>
                    </td>
                  ))}
                  <td class={org.credit <= 0 ? 'negative' : undefined}>{formatUsd(org.credit)}</td>
                  <SessionCells org={org} />
                  <td>
                    <div class="row-actions">
                      <a href={href({ page: 'keys', orgId: org.id })} aria-label={`Keys of ${org.name}`}>
                        Keys
                      </a>
                      <a href={href({ page: 'usage', orgId: org.id })} aria-label={`Usage of ${org.name}`}>
                        Usage
                      </a>
                      <button
                        type="button"
                        class="secondary"
                        aria-label={`Edit budgets and limits of ${org.name}`}
                        onClick={() => setAction({ kind: 'budgets', org })}
                      >
                        Budgets and limits
                      </button>
                      <button
                        type="button"
                        class="secondary"
                        aria-label={`Top up credit of ${org.name}`}
                        onClick={() => setAction({ kind: 'top-up', org })}
                      >
                        Top up
                      </button>
                      <button
                        type="button"
                        class="danger"
                        aria-label={`Delete ${org.name}`}
                        onClick={() => setAction({ kind: 'delete', org })}
                      >
                        Delete
                      </button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {action?.kind === 'budgets' && (
        <BudgetsDialog
          org={action.org}
          onClose={close}
          onSaved={() => done(`Budgets and limits of ${action.org.name} saved`)}
        />
      )}
      {action?.kind === 'top-up' && (
        <TopUpDialog
          org={action.org}
          onClose={close}
          onSaved={(org) => done(`Credit of ${org.name} is now ${formatUsd(org.credit)}`)}
        />
      )}
      {action?.kind === 'delete' && (
        <ConfirmDialog
          title="Delete organization"
          confirmLabel="Delete organization"
          busy={busy}
          error={deleteError}
          onClose={close}
          onConfirm={() => void remove(action.org)}
        >
          <p>
            Delete <strong>{action.org.name}</strong> ({action.org.id})? Every key of it is revoked at once and its
            budgets, credit and usage are removed. This cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

/** An organization's sessions and turns now, each against its limit ("service default" when null). */
function SessionCells({ org }: { org: Organization }) {
  const { turns, session_limits: limits } = org;
  const count = (value: number | undefined) => (value === undefined ? '—' : formatInteger(value));
  return (
    <>
      <td>
        {count(turns?.sessions)} held
        <span class="sub">limit {limitText(limits.sessions)}</span>
      </td>
      <td>
        {count(turns?.running)} running, {count(turns?.waiting)} waiting
        <span class="sub">running limit {limitText(limits.running_turns)}</span>
        <span class="sub">waiting limit {limitText(limits.waiting_turns)}</span>
        <span class="sub">weight {limitText(limits.weight)}</span>
      </td>
    </>
  );
}

const CREATE_FIELDS = ['id', 'name', 'budgets.requests', 'budgets.input_tokens', 'budgets.output_tokens', 'credit'];

function CreateOrganizationForm({ onCreated }: { onCreated: (org: Organization) => void }) {
  const empty = { id: '', name: '', requests: '60', input: '100000', output: '50000', credit: '10' };
  const [values, setValues] = useState(empty);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const set = (field: keyof typeof empty) => (value: string) => setValues({ ...values, [field]: value });

  const submit = async (event: Event) => {
    event.preventDefault();
    const checked = validate(CreateOrganizationRequest, {
      id: values.id.trim() || undefined,
      name: values.name,
      budgets: {
        requests: numberValue(values.requests),
        input_tokens: numberValue(values.input),
        output_tokens: numberValue(values.output),
      },
      credit: numberValue(values.credit),
    });
    if (!checked.ok) return setErrors(checked.errors);
    setBusy(true);
    setErrors({});
    try {
      const org = await api.createOrganization(checked.data);
      setValues(empty);
      onCreated(org);
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError('Creating failed.', 0);
      setErrors({ [apiErrorField(e.param, CREATE_FIELDS)]: e.message });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="create-org-title">
      <h2 id="create-org-title">Create an organization</h2>
      <div class="grid">
        <Field id="name" label="Name" value={values.name} onValue={set('name')} error={errors.name} />
        <Field
          id="id"
          label="Id (optional)"
          hint="Letters, digits, _ and -; generated when empty."
          value={values.id}
          onValue={set('id')}
          error={errors.id}
        />
        <BudgetFields idPrefix="" values={values} set={set} errors={errors} />
        <Field
          id="credit"
          label="Initial credit (USD)"
          inputMode="decimal"
          value={values.credit}
          onValue={set('credit')}
          error={errors.credit}
        />
      </div>
      <FormError message={errors._form ?? errors.budgets} />
      <button type="submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create organization'}
      </button>
    </form>
  );
}
