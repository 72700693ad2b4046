import type { ComponentChildren } from 'preact';

/** "Loading…", announced politely. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="status" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}

/** An error, announced at once; with a retry button when given. */
export function ErrorNote({ message, onRetry }: { message: string; onRetry?: () => void }) {
  return (
    <div class="error-note" role="alert">
      <p>{message}</p>
      {onRetry && (
        <button type="button" class="secondary" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** What an empty list shows. */
export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** A table that scrolls sideways on narrow screens; focusable so keyboard users can scroll it. */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}
