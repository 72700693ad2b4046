import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RedisConnectionConfig } from '../redis-config';
import { freePort } from './free-port';
import { spawnRedis } from './redis-server';

/** PEM files of a throw-away CA, a server certificate for 127.0.0.1 and a client certificate. */
export interface TestCertificates {
  dir: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
}

/**
 * Makes a CA and two certificates it signs (P-256 keys, valid a day) with `openssl`: one for a
 * server at 127.0.0.1 and localhost, one for a client. The caller removes `dir`.
 */
export function makeTestCertificates(): TestCertificates {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollway-tls-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=Tollway test CA');
  const sign = (name: string, subject: string, extensions: string) => {
    openssl('req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject);
    writeFileSync(file(`${name}.ext`), extensions);
    openssl(
      ...['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'],
      ...['-out', `${name}.crt`, '-days', '1', '-extfile', `${name}.ext`],
    );
  };
  sign('server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  sign('client', '/CN=tollway', 'extendedKeyUsage=clientAuth\n');
  return {
    dir,
    caFile: file('ca.crt'),
    serverCertFile: file('server.crt'),
    serverKeyFile: file('server.key'),
    clientCertFile: file('client.crt'),
    clientKeyFile: file('client.key'),
  };
}

/** A redis-server that speaks only TLS, asks clients for a certificate, and knows one ACL user. */
export interface TlsRedis {
  port: number;
  /** `rediss://user:password@127.0.0.1:port`. */
  url: string;
  certificates: TestCertificates;
  /** What createRedis takes: the URL, the CA and the client certificate (PEM text). */
  connection: RedisConnectionConfig;
  /** The same as a process's environment (REDIS_URL, REDIS_TLS_*_FILE). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` with TLS only (no plain port), mutual TLS required, its `default` user
 * off and `user` the one ACL user, allowed everything.
 */
export async function startTlsRedis(user: { name: string; password: string }): Promise<TlsRedis> {
  const certificates = makeTestCertificates();
  const port = await freePort();
  const args = [
    ...['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    ...['--dir', certificates.dir, '--tls-cert-file', certificates.serverCertFile],
    ...['--tls-key-file', certificates.serverKeyFile, '--tls-ca-cert-file', certificates.caFile],
    ...['--tls-auth-clients', 'yes'],
    ...['--user', 'default', 'off', '--user', user.name, 'on', `>${user.password}`, '~*', '&*', '+@all'],
  ];
  const pem = (file: string) => readFileSync(file, 'utf8');
  const node = await spawnRedis('redis-server', args, port, {
    tls: { ca: pem(certificates.caFile), cert: pem(certificates.clientCertFile), key: pem(certificates.clientKeyFile) },
  });
  const url = `rediss://${encodeURIComponent(user.name)}:${encodeURIComponent(user.password)}@127.0.0.1:${port}`;
  return {
    port,
    url,
    certificates,
    connection: {
      redisUrl: url,
      redisTlsCa: pem(certificates.caFile),
      redisTlsCert: pem(certificates.clientCertFile),
      redisTlsKey: pem(certificates.clientKeyFile),
    },
    env: {
      REDIS_URL: url,
      REDIS_TLS_CA_FILE: certificates.caFile,
      REDIS_TLS_CERT_FILE: certificates.clientCertFile,
      REDIS_TLS_KEY_FILE: certificates.clientKeyFile,
    },
    async stop() {
      await node.kill();
      rmSync(certificates.dir, { recursive: true, force: true });
    },
  };
}
