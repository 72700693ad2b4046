export * from './free-port';
export * from './raw-http';
export * from './redis-sentinels';
export * from './redis-server';
export * from './redis-tls';
export * from './tcp-link';
export * from './redis-monitor';
