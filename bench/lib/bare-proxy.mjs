// A bare pass-through HTTP proxy, a reference for what relaying alone costs in Node: a node:http
// server that forwards each request's body to the engine on a keep-alive node:http agent and pipes
// the answer back byte for byte. No authentication, no parsing, no budgets, no logs, no limits: a
// bench tool on 127.0.0.1, not a service. The gateway table runs it beside the gateway so that a
// stream rate can be read against what relaying alone allows.
// Usage: node bench/lib/bare-proxy.mjs <engine port>   (prints {"message":"bare proxy listening","port":N})
import http from 'node:http';

const enginePort = Number(process.argv[2]);
if (!Number.isInteger(enginePort) || enginePort <= 0) {
  console.error('usage: node bench/lib/bare-proxy.mjs <engine port>');
  process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

const server = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (part) => parts.push(part));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    const upstream = http.request(
      {
        host: '127.0.0.1',
        port: enginePort,
        method: req.method,
        path: req.url,
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, { 'content-type': answer.headers['content-type'] ?? 'text/plain' });
        // An engine answer that breaks ends the client's too: no stream is left hanging.
        answer.on('error', () => res.destroy());
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    // A client gone before the engine answered.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    upstream.end(body);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ message: 'bare proxy listening', port: server.address().port }));
});
