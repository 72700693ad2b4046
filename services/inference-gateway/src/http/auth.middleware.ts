import type { NextFunction, Request, Response } from 'express';
import { ORGANIZATION_HEADER } from '@tollway/contracts';
import type { Authenticator, Principal } from '../admission/admission.types';
import { invalidApiKey } from '../errors';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** Requires `Authorization: Bearer <key>`; the principal lands in `res.locals.principal`. Otherwise 401. */
export function requireApiKey(authenticator: Authenticator) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers.authorization;
    const token = header ? BEARER.exec(header)?.[1] : undefined;
    const organization = req.headers[ORGANIZATION_HEADER];
    authenticator.authenticate(token, typeof organization === 'string' ? organization : undefined).then(
      (principal) => {
        if (!principal) return next(invalidApiKey());
        res.locals.principal = principal;
        next();
      },
      (err: unknown) => next(err),
    );
  };
}

/** The principal `requireApiKey` stored. */
export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}
