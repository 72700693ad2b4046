// From the shared bench-host kit; bundled by pack-ab.sh for turn-cost-ab.sh.
// Turn load for the scale run: C clients, each with its own session on API base URL U, loop send + long-poll.
// Runs SECS seconds, prints "turns=N p50=.. p99=.. errors=E". Env: U, KEY, C (64), SECS (10).
const U = process.env.U,
  K = process.env.KEY,
  C = +(process.env.C ?? 64),
  SECS = +(process.env.SECS ?? 10);
const h = { authorization: `Bearer ${K}`, 'content-type': 'application/json' };
const ids = await Promise.all(
  Array.from(
    { length: C },
    async () => (await (await fetch(`${U}/sessions`, { method: 'POST', headers: h, body: '{}' })).json()).session_id,
  ),
);
const lat = [];
let errors = 0;
const end = performance.now() + SECS * 1000;
await Promise.all(
  ids.map(async (id) => {
    while (performance.now() < end) {
      const s = performance.now();
      try {
        const r = await fetch(`${U}/sessions/${id}/messages`, {
          method: 'POST',
          headers: h,
          body: '{"content":"hello"}',
        });
        await r.arrayBuffer();
        if (r.status !== 202) {
          errors++;
          await new Promise((z) => setTimeout(z, 20));
          continue;
        }
        const w = await (await fetch(`${U}/sessions/${id}?wait=true&timeout=30`, { headers: h })).json();
        if (w.status === 'idle') lat.push(performance.now() - s);
        else errors++;
      } catch {
        errors++;
      }
    }
  }),
);
lat.sort((a, b) => a - b);
const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN);
console.log(`turns=${lat.length} p50=${q(0.5).toFixed(1)} p99=${q(0.99).toFixed(1)} errors=${errors}`);
