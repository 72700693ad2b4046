import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

/** A value loaded from the API: loading, its data, or the API's error message. */
export interface Resource<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads `load()` on mount and whenever `deps` change; with `refreshMs`, again every `refreshMs`
 * while the tab is visible (a failed refresh keeps the last data and shows the error).
 */
export function useResource<T>(load: () => Promise<T>, deps: unknown[], refreshMs?: number): Resource<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  const run = useCallback(load, deps);

  const reload = useCallback(() => {
    const mine = ++generation.current;
    setLoading(true);
    run().then(
      (value) => {
        if (mine !== generation.current) return;
        setData(value);
        setError(null);
        setLoading(false);
      },
      (err: unknown) => {
        if (mine !== generation.current) return;
        setError(err instanceof ApiError ? err.message : 'Something went wrong.');
        setLoading(false);
      },
    );
  }, [run]);

  useEffect(() => {
    setData(null);
    reload();
    if (!refreshMs) return;
    const timer = window.setInterval(() => {
      if (document.visibilityState === 'visible') reload();
    }, refreshMs);
    return () => window.clearInterval(timer);
  }, [reload, refreshMs]);

  return { data, error, loading, reload };
}
