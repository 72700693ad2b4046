import { Router, type RequestHandler } from 'express';
import type { CatalogStore } from '../catalog/catalog-store';
import { modelNotFound } from '../errors';

/**
 * `GET /models` and `GET /models/{author}/{slug}`. The id may also arrive as one encoded segment
 * (`tollway%2Fsim-chat`, as the openai SDK sends it); every shape joins back to `<author>/<slug>`.
 */
export function modelsRouter(catalog: CatalogStore, auth: RequestHandler): Router {
  const router = Router();
  router.get('/models', auth, (_req, res) => {
    res.json({ object: 'list', data: catalog.list() });
  });
  router.get('/models/*id', auth, (req, res) => {
    const segments = (req.params as { id: string[] }).id;
    const id = segments.join('/');
    const model = catalog.get(id);
    if (!model) throw modelNotFound(id);
    res.json({ id: model.id, object: 'model', created: model.created, owned_by: model.owned_by });
  });
  return router;
}
