import type { Redis } from 'ioredis';
import type { UsageCounters, UsageReport } from './account.types';
import { USAGE_FIELDS, USAGE_MODEL_SEPARATOR, type AccountKeys, type UsageField } from './redis-keys';

const MINUTE_MS = 60_000;

function emptyCounters(): UsageCounters {
  return { requests: 0, input_tokens: 0, output_tokens: 0, spend: 0 };
}

function isUsageField(name: string): name is UsageField {
  return (USAGE_FIELDS as readonly string[]).includes(name);
}

/** Reads the per-minute usage hashes of the last `minutes` minutes (the current one included). */
export async function readUsage(
  redis: Redis,
  keys: AccountKeys,
  orgId: string,
  nowMs: number,
  minutes: number,
): Promise<UsageReport> {
  const last = Math.floor(nowMs / MINUTE_MS);
  const first = last - minutes + 1;
  const pipeline = redis.pipeline();
  for (let minute = first; minute <= last; minute++) pipeline.hgetall(keys.usageMinute(orgId, minute));
  const results = (await pipeline.exec()) ?? [];

  const totals = emptyCounters();
  const models = new Map<string, UsageCounters>();
  const byMinute: UsageReport['by_minute'] = [];
  results.forEach(([err, value], index) => {
    if (err) throw err;
    const hash = value as Record<string, string>;
    if (Object.keys(hash).length === 0) return;
    const counters = emptyCounters();
    for (const [field, raw] of Object.entries(hash)) {
      const amount = Number(raw);
      const cut = field.lastIndexOf(USAGE_MODEL_SEPARATOR);
      if (cut === -1) {
        if (isUsageField(field)) counters[field] += amount;
        continue;
      }
      const kind = field.slice(cut + 1);
      if (!isUsageField(kind)) continue;
      const model = field.slice(0, cut);
      const perModel = models.get(model) ?? emptyCounters();
      perModel[kind] += amount;
      models.set(model, perModel);
    }
    for (const field of USAGE_FIELDS) totals[field] += counters[field];
    byMinute.push({ minute: (first + index) * 60, ...roundSpend(counters) });
  });

  return {
    org_id: orgId,
    start: first * 60,
    end: (last + 1) * 60,
    totals: roundSpend(totals),
    by_model: [...models.entries()]
      .map(([model, counters]) => ({ model, ...roundSpend(counters) }))
      .sort((a, b) => a.model.localeCompare(b.model)),
    by_minute: byMinute,
  };
}

function roundSpend(counters: UsageCounters): UsageCounters {
  return { ...counters, spend: Math.round(counters.spend * 1e12) / 1e12 };
}
