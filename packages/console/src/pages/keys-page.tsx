import { CreateApiKeyRequest, type ApiKey, type CreatedApiKey } from '@tollway/contracts';
import type { RefObject } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { announce } from '../announce';
import { ConfirmDialog } from '../components/dialog';
import { apiErrorField, Field, FormError, validate, type FieldErrors } from '../components/form';
import { Empty, ErrorNote, Loading, TableWrap } from '../components/status';
import { formatTime } from '../format';
import { OrgHeading } from './org-heading';
import { useResource } from '../use-resource';

/** An organization's keys: list (redacted), create (secret shown once), revoke. */
export function KeysPage(props: { orgId: string; operator: boolean; heading: RefObject<HTMLHeadingElement> }) {
  const { orgId } = props;
  const keys = useResource(() => api.keys(orgId), [orgId]);
  const org = useResource(() => api.organization(orgId), [orgId]);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [busy, setBusy] = useState(false);
  const [revokeError, setRevokeError] = useState<string>();

  const revoke = async (key: ApiKey) => {
    setBusy(true);
    try {
      await api.revokeKey(orgId, key.id);
      setRevoking(null);
      setRevokeError(undefined);
      announce(`Key ${key.name ?? key.redacted} revoked`);
      keys.reload();
    } catch (err) {
      setRevokeError(err instanceof ApiError ? err.message : 'Revoking failed.');
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <OrgHeading org={org} orgId={orgId} page="keys" operator={props.operator} heading={props.heading} />
      {created ? (
        <NewKeySecret created={created} onDone={() => setCreated(null)} />
      ) : (
        <CreateKeyForm
          orgId={orgId}
          onCreated={(key) => {
            setCreated(key);
            keys.reload();
          }}
        />
      )}
      <h2>Keys</h2>
      {keys.loading && !keys.data && <Loading what="keys" />}
      {keys.error && <ErrorNote message={keys.error} onRetry={keys.reload} />}
      {keys.data && keys.data.data.length === 0 && <Empty>This organization has no keys yet.</Empty>}
      {keys.data && keys.data.data.length > 0 && (
        <TableWrap label="Keys">
          <table>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Status</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.data.map((key) => (
                <tr key={key.id} class={key.revoked_at !== null ? 'revoked' : undefined}>
                  <th scope="row">
                    <code>{key.redacted}</code>
                  </th>
                  <td>{key.name ?? '—'}</td>
                  <td>{key.role}</td>
                  <td>{formatTime(key.created)}</td>
                  <td>{key.last_used_at === null ? 'Never' : formatTime(key.last_used_at)}</td>
                  <td>{key.revoked_at === null ? 'Active' : `Revoked ${formatTime(key.revoked_at)}`}</td>
                  <td>
                    {key.revoked_at === null && (
                      <button
                        type="button"
                        class="danger"
                        aria-label={`Revoke key ${key.name ?? ''} ${key.redacted}`}
                        onClick={() => setRevoking(key)}
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {revoking && (
        <ConfirmDialog
          title="Revoke key"
          confirmLabel="Revoke key"
          busy={busy}
          error={revokeError}
          onClose={() => {
            setRevoking(null);
            setRevokeError(undefined);
          }}
          onConfirm={() => void revoke(revoking)}
        >
          <p>
            Revoke <code>{revoking.redacted}</code>
            {revoking.name && <> ({revoking.name})</>}? Every gateway refuses it within a second, and it cannot be
            restored.
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

function CreateKeyForm({ orgId, onCreated }: { orgId: string; onCreated: (key: CreatedApiKey) => void }) {
  const [name, setName] = useState('');
  const [role, setRole] = useState('standard');
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const checked = validate(CreateApiKeyRequest, { name: name.trim() || undefined, role });
    if (!checked.ok) return setErrors(checked.errors);
    setBusy(true);
    setErrors({});
    try {
      const key = await api.createKey(orgId, checked.data);
      setName('');
      onCreated(key);
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError('Creating failed.', 0);
      setErrors({ [apiErrorField(e.param, ['name', 'role'])]: e.message });
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="create-key-title">
      <h2 id="create-key-title">Create a key</h2>
      <div class="grid">
        <Field id="key-name" label="Name (optional)" value={name} onValue={setName} error={errors.name} />
        <div class="field">
          <label for="key-role">Role</label>
          <select id="key-role" value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value)}>
            <option value="standard">Standard: calls models</option>
            <option value="admin">Admin: signs in here, manages keys</option>
          </select>
          {errors.role && <p class="field-error">{errors.role}</p>}
        </div>
      </div>
      <FormError message={errors._form} />
      <button type="submit" disabled={busy}>
        {busy ? 'Creating…' : 'Create key'}
      </button>
    </form>
  );
}

/** The new key's secret, shown this once with a copy button. */
function NewKeySecret({ created, onDone }: { created: CreatedApiKey; onDone: () => void }) {
  const title = useRef<HTMLHeadingElement>(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => title.current?.focus(), []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied(true);
      announce('Key copied to the clipboard');
    } catch {
      announce('Copying failed: select the key and copy it by hand');
    }
  };
  return (
    <section class="card secret" aria-labelledby="new-key-title">
      <h2 id="new-key-title" ref={title} tabIndex={-1}>
        Key created: copy it now
      </h2>
      <p>
        This is the only time the key is shown. Store it somewhere safe; if it is lost, revoke it and create another.
      </p>
      <div class="secret-row">
        <label for="new-key-value" class="visually-hidden">
          New {created.role} key {created.name ?? ''}
        </label>
        <input
          id="new-key-value"
          readOnly
          value={created.key}
          onFocus={(e) => (e.target as HTMLInputElement).select()}
        />
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy key'}
        </button>
      </div>
      <button type="button" class="secondary" onClick={onDone}>
        Done, I stored it
      </button>
    </section>
  );
}
