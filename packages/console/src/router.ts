import { useEffect, useState } from 'preact/hooks';

/** The console's pages, addressed by the URL's hash so the gateway serves one index.html. */
export type Route =
  | { page: 'organizations' }
  | { page: 'keys'; orgId: string }
  | { page: 'usage'; orgId: string }
  | { page: 'models' }
  | { page: 'unknown' };

/**
 * Parses `#/organizations`, `#/organizations/<id>/keys`, `#/organizations/<id>/usage`, `#/models`.
 * A hash with a broken percent-escape (`%E0%A4%A`, from a link cut short) is an unknown page, not
 * an exception that would leave the page blank.
 */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodePart);
  if (parts.includes(null)) return { page: 'unknown' };
  if (parts.length === 0 || (parts.length === 1 && parts[0] === 'organizations')) return { page: 'organizations' };
  if (parts.length === 1 && parts[0] === 'models') return { page: 'models' };
  if (parts.length === 3 && parts[0] === 'organizations' && (parts[2] === 'keys' || parts[2] === 'usage')) {
    return { page: parts[2], orgId: parts[1] as string };
  }
  return { page: 'unknown' };
}

/** A percent-decoded hash segment, or null when its escapes are malformed. */
function decodePart(part: string): string | null {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

/** The hash of a route. */
export function href(route: Route): string {
  switch (route.page) {
    case 'keys':
    case 'usage':
      return `#/organizations/${encodeURIComponent(route.orgId)}/${route.page}`;
    case 'models':
      return '#/models';
    default:
      return '#/organizations';
  }
}

/** The current route, following hash changes. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const follow = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, []);
  return route;
}
