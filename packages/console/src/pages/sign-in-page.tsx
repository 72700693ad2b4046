import { ConsoleSignInRequest, type ConsoleSession } from '@tollway/contracts';
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api';
import { Field, FormError, validate } from '../components/form';

/** Sign-in with the admin token (operator) or an organization admin key. */
export function SignInPage({ notice, onSignedIn }: { notice?: string; onSignedIn: (session: ConsoleSession) => void }) {
  const [token, setToken] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const checked = validate(ConsoleSignInRequest, { token: token.trim() });
    if (!checked.ok) return setErrors(checked.errors);
    setBusy(true);
    setErrors({});
    try {
      const session = await api.signIn(checked.data.token);
      setToken('');
      onSignedIn(session);
    } catch (err) {
      setErrors({ _form: err instanceof ApiError ? err.message : 'Sign-in failed.' });
      setBusy(false);
    }
  };

  return (
    <main id="main" class="narrow">
      <h1>Tollway console</h1>
      <p>Sign in with the gateway's admin token, or with an organization admin key.</p>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <form onSubmit={submit} noValidate>
        <Field
          id="token"
          label="Admin token or organization admin key"
          type="password"
          autoComplete="current-password"
          value={token}
          onValue={setToken}
          error={errors.token}
          autoFocus
        />
        <FormError message={errors._form} />
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
