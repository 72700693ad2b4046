import { readFileSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Model } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import { parse as parseYaml } from 'yaml';
import { CatalogFile, type CatalogModel } from './catalog.schema';

/** The catalog file is unreadable or invalid; the message names the file and the bad entry. */
export class CatalogError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CatalogError';
  }
}

/** Parses and validates catalog text (YAML, of which JSON is a subset). Throws CatalogError. */
export function parseCatalog(text: string, source: string): CatalogModel[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new CatalogError(`Catalog ${source} is not valid YAML or JSON: ${(err as Error).message}`, { cause: err });
  }
  const parsed = CatalogFile.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${describePath(raw, issue.path)}: ${issue.message}`);
    throw new CatalogError(`Catalog ${source} is invalid: ${problems.join('; ')}`, { cause: parsed.error });
  }
  return parsed.data.models;
}

/** Reads, parses and validates a catalog file. Throws CatalogError. */
export function loadCatalogFile(file: string): CatalogModel[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CatalogError(`Catalog ${file} cannot be read: ${(err as Error).message}`, { cause: err });
  }
  return parseCatalog(text, file);
}

/** `models[2] (acme/big).engine.replicas[0].base_url` — the entry named by its id when it has one. */
function describePath(raw: unknown, issuePath: ReadonlyArray<PropertyKey>): string {
  if (issuePath.length === 0) return '(root)';
  let out = '';
  let node: unknown = raw;
  issuePath.forEach((part, index) => {
    out += typeof part === 'number' ? `[${part}]` : index === 0 ? String(part) : `.${String(part)}`;
    node = node && typeof node === 'object' ? (node as Record<PropertyKey, unknown>)[part as never] : undefined;
    if (index === 1 && issuePath[0] === 'models' && node && typeof node === 'object') {
      const id = (node as { id?: unknown }).id;
      if (typeof id === 'string') out += ` (${id})`;
    }
  });
  return out;
}

/** Listener of catalog changes. */
export type CatalogListener = (models: readonly CatalogModel[]) => void;

/**
 * The models the gateway serves, reloadable without a restart: `reload()` (wired to SIGHUP)
 * and, optionally, a watch on the file. A reload that fails keeps the previous catalog.
 */
export class CatalogStore {
  private models: readonly CatalogModel[] = [];
  private byId = new Map<string, CatalogModel>();
  private modelList: Model[] = [];
  private readonly listeners: CatalogListener[] = [];
  private watcher: FSWatcher | null = null;
  private debounce: NodeJS.Timeout | null = null;

  constructor(
    models: readonly CatalogModel[],
    readonly file: string | null = null,
  ) {
    this.replace(models);
  }

  /** Loads the store from a file. Throws CatalogError. */
  static fromFile(file: string): CatalogStore {
    return new CatalogStore(loadCatalogFile(file), path.resolve(file));
  }

  /** The catalog entry of `id`. */
  get(id: string): CatalogModel | undefined {
    return this.byId.get(id);
  }

  /** Every entry. */
  all(): readonly CatalogModel[] {
    return this.models;
  }

  /** The public Model resources, in catalog order. */
  list(): readonly Model[] {
    return this.modelList;
  }

  /** Calls `listener` now and after every successful reload. */
  subscribe(listener: CatalogListener): void {
    this.listeners.push(listener);
    listener(this.models);
  }

  /** Re-reads the file; throws CatalogError and keeps the current catalog when the file is bad. */
  reload(): readonly CatalogModel[] {
    if (!this.file) return this.models;
    this.replace(loadCatalogFile(this.file));
    return this.models;
  }

  /** Reloads when the file changes (debounced); failures go to `onError`, the old catalog stays. */
  watch(onReload: (models: readonly CatalogModel[]) => void, onError: (err: unknown) => void): void {
    if (!this.file || this.watcher) return;
    const file = this.file;
    // Watch the directory: editors replace files by rename, which ends a watch on the file itself.
    this.watcher = watch(path.dirname(file), (_event, name) => {
      if (name !== null && name !== path.basename(file)) return;
      if (this.debounce) clearTimeout(this.debounce);
      this.debounce = setTimeout(() => {
        this.debounce = null;
        try {
          onReload(this.reload());
        } catch (err) {
          onError(err);
        }
      }, 100);
    });
    this.watcher.unref();
  }

  /** Stops watching the file. */
  close(): void {
    this.watcher?.close();
    this.watcher = null;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = null;
  }

  private replace(models: readonly CatalogModel[]): void {
    this.models = models;
    this.byId = new Map(models.map((model) => [model.id, model]));
    this.modelList = models.map((model) => ({
      id: model.id,
      object: 'model',
      created: model.created,
      owned_by: model.owned_by,
    }));
    for (const listener of this.listeners) listener(models);
  }
}

/** Reloads `catalog` on SIGHUP and, when `watchFile`, when its file changes; logs each outcome. */
export function followCatalogChanges(catalog: CatalogStore, logger: Logger, watchFile: boolean): void {
  const reloaded = (models: readonly CatalogModel[]) => logger.info('catalog reloaded', { models: models.length });
  const failed = (err: unknown) =>
    logger.error('catalog reload failed; keeping the previous one', {
      err: err instanceof Error ? err.message : String(err),
    });
  if (watchFile) catalog.watch(reloaded, failed);
  process.on('SIGHUP', () => {
    try {
      reloaded(catalog.reload());
    } catch (err) {
      failed(err);
    }
  });
}
