export * from './redis-server';
