export * from './config';
export * from './error-middleware';
export * from './http';
export * from './logger';
export * from './redis';
export * from './request-id';
export * from './service-error';
export * from './shutdown';
