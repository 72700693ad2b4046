import { Router, type RequestHandler } from 'express';
import type { CatalogStore } from '../catalog/catalog-store';
import { modelNotFound } from '../errors';

/**
 * `/models/<anything>` without a capture group: express would percent-decode a path parameter
 * itself and answer a malformed one (`/models/%zz`) with a URIError; here the handler decodes.
 */
const MODEL_PATH = /^\/models\/.+$/;

/**
 * `GET /models` and `GET /models/{author}/{slug}`. The id may also arrive as one encoded segment
 * (`tollway%2Fsim-chat`, as the openai SDK sends it); every shape joins back to `<author>/<slug>`.
 * An id that is not valid percent-encoding names no model: 404 like any unknown id.
 */
export function modelsRouter(catalog: CatalogStore, auth: RequestHandler): Router {
  const router = Router();
  router.get('/models', auth, (_req, res) => {
    res.json({ object: 'list', data: catalog.list() });
  });
  router.get(MODEL_PATH, auth, (req, res) => {
    const raw = req.path.slice('/models/'.length);
    const id = decodePath(raw);
    const model = id === null ? undefined : catalog.get(id);
    if (!model) throw modelNotFound(id ?? raw);
    res.json({ id: model.id, object: 'model', created: model.created, owned_by: model.owned_by });
  });
  return router;
}

function decodePath(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}
