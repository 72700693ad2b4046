import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEFAULT_CATALOG_PATH } from '../config';
import { CatalogError, CatalogStore, loadCatalogFile, parseCatalog } from './catalog-store';

const entry = (id: string, extra = '') => `
  - id: ${id}
    owned_by: t
    created: 1
    price_per_million: { input: 1, output: 2 }
    engine: { kind: simulated }${extra}`;

describe('catalog', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'catalog-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ships a default catalog with the four simulated models other tests rely on', () => {
    const models = loadCatalogFile(DEFAULT_CATALOG_PATH);
    expect(models.map((m) => m.id)).toEqual([
      'tollway/sim-chat',
      'tollway/sim-narrow',
      'tollway/sim-prod',
      'tollway/sim-reasoner',
    ]);
    expect(models.find((m) => m.id === 'tollway/sim-narrow')?.narrowed).toBe(true);
    expect(models.find((m) => m.id === 'tollway/sim-prod')?.production).toBe(true);
    expect(models.every((m) => m.capacity !== null && m.engine.kind === 'simulated')).toBe(true);
  });

  it('reads JSON as well as YAML and applies defaults', () => {
    const [model] = parseCatalog(
      JSON.stringify({
        models: [
          {
            id: 'a/b',
            owned_by: 'o',
            created: 1,
            price_per_million: { input: 0, output: 0 },
            engine: { kind: 'simulated' },
          },
        ],
      }),
      'x.json',
    );
    expect(model).toMatchObject({
      narrowed: false,
      production: false,
      capacity: null,
      engine: { time_to_first_token_ms: 5 },
    });
  });

  /** An openai-compatible engine whose `routing:` is ROUTING (replaced by each case). */
  const ROUTED = "{ kind: openai-compatible, replicas: [{ base_url: 'http://127.0.0.1:9/v1' }], routing: ROUTING }";

  it.each([
    ['a bad id', `models:${entry('no-slash')}`, /models\[0\] \(no-slash\)\.id: model id must be of the form/],
    [
      'a bad replica URL',
      `models:${entry('a/b').replace('{ kind: simulated }', '{ kind: openai-compatible, replicas: [{ base_url: nope }] }')}`,
      /models\[0\] \(a\/b\)\.engine\.replicas\[0\]\.base_url/,
    ],
    [
      'no replicas',
      `models:${entry('a/b').replace('{ kind: simulated }', '{ kind: openai-compatible, replicas: [] }')}`,
      /models\[0\] \(a\/b\)\.engine\.replicas/,
    ],
    ['an unknown field', `models:${entry('a/b', '\n    colour: red')}`, /models\[0\] \(a\/b\).*colour/],
    ['a duplicate id', `models:${entry('a/b')}${entry('a/b')}`, /models\[1\] \(a\/b\)\.id: duplicate model id "a\/b"/],
    [
      'an unknown engine kind',
      `models:${entry('a/b').replace('simulated', 'gpu')}`,
      /models\[0\] \(a\/b\)\.engine\.kind/,
    ],
    [
      'an unknown routing policy',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ policy: random }'))}`,
      /models\[0\] \(a\/b\)\.engine\.routing\.policy: .*least_outstanding.*prefix_cache.*sticky/,
    ],
    [
      'a load factor below 1',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ load_factor: 0.5 }'))}`,
      /engine\.routing\.load_factor/,
    ],
    [
      'a load bound floor of zero',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ min_load_bound: 0 }'))}`,
      /engine\.routing\.min_load_bound/,
    ],
    [
      'a fractional load bound floor',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ min_load_bound: 2.5 }'))}`,
      /engine\.routing\.min_load_bound/,
    ],
    [
      'a huge load bound floor',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ min_load_bound: 1e300 }'))}`,
      /engine\.routing\.min_load_bound/,
    ],
    [
      'a share_index that is not a boolean',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ share_index: "yes" }'))}`,
      /engine\.routing\.share_index/,
    ],
    [
      'a staleness bound shorter than the scrape interval',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ scrape_interval_ms: 5000, max_staleness_ms: 1000 }'))}`,
      /engine\.routing\.max_staleness_ms: max_staleness_ms must be at least scrape_interval_ms/,
    ],
    [
      'a misspelt routing setting',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ polcy: sticky }'))}`,
      /engine\.routing.*polcy/,
    ],
    [
      'an unbounded prefix index',
      `models:${entry('a/b').replace('{ kind: simulated }', ROUTED.replace('ROUTING', '{ index_entries: 1e12 }'))}`,
      /engine\.routing\.index_entries/,
    ],
    [
      'a simulated KV cache of no blocks',
      `models:${entry('a/b').replace('{ kind: simulated }', '{ kind: simulated, prefix_caching: { kv_cache_blocks: 0 } }')}`,
      /engine\.prefix_caching\.kv_cache_blocks/,
    ],
    ['broken YAML', 'models: [', /not valid YAML or JSON/],
    ['no models', 'models: []', /models/],
  ])('names the bad entry for %s', (_name, text, message) => {
    expect(() => parseCatalog(text, 'test.yaml')).toThrow(CatalogError);
    expect(() => parseCatalog(text, 'test.yaml')).toThrow(message);
  });

  it('reloads on demand, keeps the old catalog when the new file is bad, and follows the file when watched', async () => {
    const file = path.join(dir, 'catalog.yaml');
    writeFileSync(file, `models:${entry('a/one')}`);
    const store = CatalogStore.fromFile(file);
    const seen: string[][] = [];
    store.subscribe((models) => seen.push(models.map((m) => m.id)));
    writeFileSync(file, `models:${entry('a/one')}${entry('a/two')}`);
    store.reload();
    expect(store.get('a/two')).toBeDefined();
    writeFileSync(file, 'models: [');
    expect(() => store.reload()).toThrow(CatalogError);
    expect(store.list().map((m) => m.id)).toEqual(['a/one', 'a/two']);

    const reloaded = new Promise<void>((resolve) =>
      store.watch(
        () => resolve(),
        () => undefined,
      ),
    );
    writeFileSync(file, `models:${entry('a/three')}`);
    await reloaded;
    expect(store.list().map((m) => m.id)).toEqual(['a/three']);
    expect(seen).toEqual([['a/one'], ['a/one', 'a/two'], ['a/three']]);
    store.close();
  });

  it('fails to load a missing file with its path in the message', () => {
    expect(() => loadCatalogFile(path.join(dir, 'missing.yaml'))).toThrow(/missing\.yaml cannot be read/);
  });
});
