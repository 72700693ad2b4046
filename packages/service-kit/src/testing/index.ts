export * from './raw-http';
export * from './redis-server';
