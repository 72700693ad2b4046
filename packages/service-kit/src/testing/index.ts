export * from './free-port';
export * from './raw-http';
export * from './redis-server';
export * from './tcp-link';
