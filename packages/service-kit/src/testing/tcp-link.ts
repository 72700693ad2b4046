import net from 'node:net';

/**
 * A TCP relay between clients and a server (a Redis) that a test can break: lose what the server
 * answers, lose what clients send, or cut every connection, the way a failing network does.
 */
export interface TcpLink {
  /** Port on 127.0.0.1 to connect to instead of the server's. */
  port: number;
  /** From now on, what the server sends is dropped (it still runs what it receives). */
  dropReplies(): void;
  /**
   * The connections open now stop relaying what the server sends, and stay open, as a connection
   * does whose peer went silent while TCP holds; new connections relay both ways.
   */
  silence(): void;
  /** From now on, what clients send is dropped (the server never sees it). */
  dropRequests(): void;
  /** Destroys every connection through the link; new ones relay both ways again. */
  cut(): void;
  /** Connections relayed so far. */
  connections(): number;
  close(): Promise<void>;
}

/** Starts a link to `targetPort` on 127.0.0.1 (port 0: the kernel picks the link's own). */
export async function startTcpLink(targetPort: number): Promise<TcpLink> {
  const open = new Set<net.Socket>();
  let relayed = 0;
  let dropReplies = false;
  let dropRequests = false;
  const silenced = new WeakSet<net.Socket>();
  const server = net.createServer((client) => {
    relayed += 1;
    const upstream = net.connect(targetPort, '127.0.0.1');
    open.add(client);
    open.add(upstream);
    client.on('data', (chunk) => {
      if (!dropRequests) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!dropReplies && !silenced.has(client)) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('the link has no port');
  return {
    port: address.port,
    dropReplies: () => {
      dropReplies = true;
    },
    dropRequests: () => {
      dropRequests = true;
    },
    silence: () => {
      for (const socket of open) silenced.add(socket);
    },
    cut: () => {
      dropReplies = false;
      dropRequests = false;
      for (const socket of open) socket.destroy();
      open.clear();
    },
    connections: () => relayed,
    close: async () => {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
