import type { ConsoleSession } from '@tollway/contracts';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, setCsrfToken, whenSignedOut } from './api';
import { announce, registerAnnouncer } from './announce';
import { Loading } from './components/status';
import { KeysPage } from './pages/keys-page';
import { ModelsPage } from './pages/models-page';
import { OrganizationsPage } from './pages/organizations-page';
import { SignInPage } from './pages/sign-in-page';
import { UsagePage } from './pages/usage-page';
import { href, useRoute, type Route } from './router';

type SessionState =
  { state: 'checking' } | { state: 'signed-out'; notice?: string } | { state: 'signed-in'; session: ConsoleSession };

/** The console: asks who is signed in, then shows the sign-in page or the page the URL names. */
export function App() {
  const [session, setSession] = useState<SessionState>({ state: 'checking' });
  const [message, setMessage] = useState('');
  registerAnnouncer(setMessage);

  const signedIn = (value: ConsoleSession) => {
    setCsrfToken(value.csrf_token);
    setSession({ state: 'signed-in', session: value });
  };
  useEffect(() => {
    whenSignedOut(() => setSession({ state: 'signed-out', notice: 'Your session ended. Sign in again.' }));
    api.session().then(signedIn, (err: unknown) => {
      const notice = err instanceof ApiError && err.status !== 401 ? err.message : undefined;
      setSession({ state: 'signed-out', notice });
    });
  }, []);

  return (
    <>
      {session.state === 'checking' && (
        <main id="main" class="narrow">
          <Loading what="the console" />
        </main>
      )}
      {session.state === 'signed-out' && <SignInPage notice={session.notice} onSignedIn={signedIn} />}
      {session.state === 'signed-in' && (
        <SignedIn
          session={session.session}
          onSignedOut={() => {
            setCsrfToken('');
            setSession({ state: 'signed-out', notice: 'You are signed out.' });
          }}
        />
      )}
      <div class="visually-hidden" role="status" aria-live="polite" aria-atomic="true" id="announcer">
        {message}
      </div>
    </>
  );
}

function SignedIn({ session, onSignedOut }: { session: ConsoleSession; onSignedOut: () => void }) {
  const route = useRoute();
  const operator = session.role === 'operator';
  const ownOrg = session.organization_id ?? '';
  // Organization admins have one organization: the list is not theirs to see.
  const shown: Route =
    !operator && (route.page === 'organizations' || route.page === 'unknown') ? { page: 'keys', orgId: ownOrg } : route;
  const heading = useRef<HTMLHeadingElement>(null);

  const signOut = () => {
    api.signOut().then(
      () => {
        announce('Signed out');
        onSignedOut();
      },
      () => onSignedOut(),
    );
  };

  const nav: Array<{ label: string; route: Route; active: boolean }> = operator
    ? [
        { label: 'Organizations', route: { page: 'organizations' }, active: shown.page !== 'models' },
        { label: 'Models', route: { page: 'models' }, active: shown.page === 'models' },
      ]
    : [
        { label: 'Keys', route: { page: 'keys', orgId: ownOrg }, active: shown.page === 'keys' },
        { label: 'Usage', route: { page: 'usage', orgId: ownOrg }, active: shown.page === 'usage' },
        { label: 'Models', route: { page: 'models' }, active: shown.page === 'models' },
      ];

  return (
    <>
      <a class="skip-link" href="#main" onClick={(e) => (e.preventDefault(), heading.current?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Tollway console</span>
        <nav aria-label="Console">
          <ul>
            {nav.map((item) => (
              <li key={item.label}>
                <a href={href(item.route)} aria-current={item.active ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>{operator ? 'Operator' : `Admin of ${ownOrg}`}</span>
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main">
        <Page route={shown} operator={operator} heading={heading} />
      </main>
    </>
  );
}

function Page({
  route,
  operator,
  heading,
}: {
  route: Route;
  operator: boolean;
  heading: preact.RefObject<HTMLHeadingElement>;
}) {
  switch (route.page) {
    case 'organizations':
      return <OrganizationsPage heading={heading} />;
    case 'keys':
      return <KeysPage orgId={route.orgId} operator={operator} heading={heading} />;
    case 'usage':
      return <UsagePage orgId={route.orgId} operator={operator} heading={heading} />;
    case 'models':
      return <ModelsPage heading={heading} />;
    default:
      return (
        <h1 ref={heading} tabIndex={-1}>
          Page not found
        </h1>
      );
  }
}
