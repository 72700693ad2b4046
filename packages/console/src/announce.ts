/**
 * One polite live region for results ("Key revoked", "Copied"), so screen readers hear what a
 * button did. The app renders the region and registers its setter here.
 */
let setMessage: (message: string) => void = () => undefined;

export function registerAnnouncer(setter: (message: string) => void): void {
  setMessage = setter;
}

/** Announces `message` (repeating the same message announces it again). */
export function announce(message: string): void {
  setMessage('');
  window.setTimeout(() => setMessage(message), 50);
}
