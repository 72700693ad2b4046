// Latency at one connection, measured exactly: one keep-alive socket, one request at a time, each
// timed with the monotonic clock from the write of its first byte to the last byte of its answer.
//
// Why not wrk here: on the 2-core VMs of this project, wrk 4.1 (Debian) at `-c1` reports a mean
// latency above the mean time between two of its requests (e.g. 95-114 µs against 65-70 µs for a
// bare node:http server: 46,766 requests in 3.0 s), which no set of true per-request latencies can
// do, and a p99 of 1.3-1.6 ms where this client, run just before and after on the same server,
// measures 0.12-0.17 ms with a mean equal to the time per request. At 32 connections wrk stays the
// load generator: there the rate is the figure, and a node client would saturate first.
import net from 'node:net';

/**
 * Sends `body` as `POST url` (bearer `key`) over one socket, one request after the other, for
 * `seconds`. Resolves `{ latencies, total, rps, non2xx, meanUs, usPerRequest }`: `latencies` in ms,
 * ascending; `meanUs` and `usPerRequest` (wall time ÷ requests) let a reader check the measurement
 * (the mean latency can only be at most the time per request). Handles answers with a
 * content-length and chunked ones (SSE streams). Rejects on a socket error, a close, an answer it
 * cannot parse, or one that takes longer than `timeoutMs` (wrk's default of 10 s).
 */
export function oneConnectionLatencies(url, body, key, seconds, { timeoutMs = 10_000 } = {}) {
  const { hostname, port, pathname, search } = new URL(url);
  const payload = Buffer.from(body);
  const request = Buffer.concat([
    Buffer.from(
      `POST ${pathname}${search} HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: application/json\r\n` +
        `authorization: Bearer ${key}\r\ncontent-length: ${payload.length}\r\n\r\n`,
      'latin1',
    ),
    payload,
  ]);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    socket.setNoDelay(true);
    socket.setTimeout(timeoutMs, () => fail(new Error(`${url} sent nothing for ${timeoutMs} ms`)));
    const latencies = [];
    let non2xx = 0;
    let pending = Buffer.alloc(0);
    let started = 0n;
    let firstStart = 0n;
    let ends = 0;
    const send = () => {
      started = process.hrtime.bigint();
      socket.write(request);
    };
    const fail = (err) => {
      socket.destroy();
      reject(err);
    };
    socket.once('connect', () => {
      ends = Date.now() + seconds * 1000;
      firstStart = process.hrtime.bigint();
      send();
    });
    socket.on('error', fail);
    socket.on('close', () => {
      if (Date.now() < ends) fail(new Error(`${url} closed the connection`));
    });
    socket.on('data', (data) => {
      pending = pending.length === 0 ? data : Buffer.concat([pending, data]);
      let answer;
      try {
        answer = completeAnswer(pending);
      } catch (err) {
        fail(err);
        return;
      }
      if (!answer) return;
      const finished = process.hrtime.bigint();
      latencies.push(Number(finished - started) / 1e6);
      if (answer.status < 200 || answer.status > 299) non2xx++;
      pending = pending.subarray(answer.length);
      if (Date.now() < ends) {
        send();
        return;
      }
      socket.removeAllListeners('close');
      socket.destroy();
      const wallUs = Number(finished - firstStart) / 1e3;
      latencies.sort((a, b) => a - b);
      const meanUs = (1000 * latencies.reduce((sum, ms) => sum + ms, 0)) / latencies.length;
      resolve({
        latencies,
        total: latencies.length,
        rps: (latencies.length * 1e6) / wallUs,
        non2xx,
        meanUs,
        usPerRequest: wallUs / latencies.length,
      });
    });
  });
}

/** The status and byte length of the HTTP/1.1 answer at the start of `bytes`, or null while it is incomplete. */
function completeAnswer(bytes) {
  const headEnd = bytes.indexOf('\r\n\r\n');
  if (headEnd === -1) return null;
  const head = bytes.subarray(0, headEnd).toString('latin1');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  if (!status) throw new Error(`not an HTTP answer: ${head.slice(0, 80)}`);
  const bodyStart = headEnd + 4;
  const length = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
  if (length) {
    const end = bodyStart + Number(length[1]);
    return bytes.length >= end ? { status: Number(status[1]), length: end } : null;
  }
  if (!/\r\ntransfer-encoding:[ \t]*chunked/i.test(head)) throw new Error('an answer with neither length nor chunks');
  let at = bodyStart;
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', at);
    if (lineEnd === -1) return null;
    const size = Number.parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error('a chunk size that is not hexadecimal');
    if (size === 0) {
      // No trailers: the last chunk is followed by an empty line.
      return bytes.length >= lineEnd + 4 ? { status: Number(status[1]), length: lineEnd + 4 } : null;
    }
    at = lineEnd + 2 + size + 2;
    if (bytes.length < at) return null;
  }
}
