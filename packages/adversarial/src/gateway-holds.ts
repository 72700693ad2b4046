import type { Problem } from './oracles';

const HOST = '127.0.0.1';
/** `name{labels} value` lines of the gauges read here. */
const GAUGE =
  /^(tollway_engine_replica_in_flight|tollway_capacity_leases_held|tollway_sse_streams_open)(?:\{([^}]*)\})? (\S+)$/gm;
const MODEL_LABEL = /model="([^"]*)"/;

/**
 * What the gateway must no longer hold once none of the requests it concerns is in flight, read
 * from its own gauges (`GET /metrics`): requests sent to an engine replica and not finished
 * (`tollway_engine_replica_in_flight`: a count that drifts up skews the least-outstanding choice of
 * replica for good), capacity leases (`tollway_capacity_leases_held`: a leaked lease refuses
 * requests a model has room for), and, with `streams`, open event streams
 * (`tollway_sse_streams_open`). `models` picks the models whose requests have all ended: a lane's
 * own (the hostile engines serve only fuzz cases) or, when nothing at all runs, every one. Waits
 * up to `settleMs` for aborts and releases to land.
 */
export async function checkNothingHeld(
  port: number,
  models: (id: string) => boolean,
  { streams, settleMs }: { streams: boolean; settleMs: number },
): Promise<Problem[]> {
  const deadline = Date.now() + settleMs;
  for (;;) {
    const held = await heldNow(port, models, streams);
    if (held.length === 0) return [];
    if (Date.now() > deadline)
      return [{ rule: 'consistency', detail: `held ${settleMs} ms after the last request ended: ${held.join(', ')}` }];
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function heldNow(port: number, models: (id: string) => boolean, streams: boolean): Promise<string[]> {
  const res = await fetch(`http://${HOST}:${port}/metrics`, { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) return [`GET /metrics answered ${res.status}`];
  const held: string[] = [];
  for (const [, name, labels = '', value] of (await res.text()).matchAll(GAUGE)) {
    if (Number(value) === 0) continue;
    if (name === 'tollway_sse_streams_open') {
      if (streams) held.push(`${value} event streams open`);
      continue;
    }
    const model = MODEL_LABEL.exec(labels)?.[1] ?? '';
    if (!models(model)) continue;
    held.push(
      name === 'tollway_capacity_leases_held'
        ? `${value} capacity leases of ${model}`
        : `${value} requests in flight to a replica of ${model}`,
    );
  }
  return held;
}
