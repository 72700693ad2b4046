// Redis's own time per turn by command and by script, from SLOWLOG at a threshold of 0 (a script's
// time includes the commands it ran, which are listed too). Run from a build's folder of the bundle
// (BUILD=bundle/new): it names the scripts from the build's own modules. Env: REDIS_PORT (6390), TURNS (the
// turns run while it logged, to divide by), LOG_MS (how long to log, 3000).
import { createRequire } from 'node:module';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const build = process.env.BUILD;
const require = createRequire(join(build, 'sess', 'package.json'));
const { Redis } = require('ioredis');
const names = {};
const lua = join(build, 'sess', 'dist', 'store', 'lua');
let files = [];
try {
  files = readdirSync(lua).filter((f) => f.endsWith('.script.js'));
} catch {
  // a build without the scheduler's scripts (BullMQ): its scripts are named by their SHA
}
for (const file of files) {
  for (const value of Object.values(require(join(lua, file)))) if (value?.sha) names[value.sha] = value.name;
}
const redis = new Redis({ port: Number(process.env.REDIS_PORT ?? 6390) });
const mode = process.argv[2];
if (mode === 'start') {
  await redis.config('SET', 'slowlog-max-len', '1000000');
  await redis.slowlog('RESET');
  await redis.config('SET', 'slowlog-log-slower-than', '0');
} else {
  await redis.config('SET', 'slowlog-log-slower-than', '10000');
  const turns = Number(process.env.TURNS);
  const log = await redis.slowlog('GET', -1);
  const by = new Map();
  for (const [, , us, argv] of log) {
    let key = String(argv[0]).toLowerCase();
    if (key === 'evalsha') key += ` ${names[argv[1]] ?? String(argv[1]).slice(0, 8)}`;
    const entry = by.get(key) ?? { calls: 0, us: 0 };
    entry.calls++;
    entry.us += us;
    by.set(key, entry);
  }
  console.log(`SLOWLOG: ${log.length} entries over ${turns} turns`);
  for (const [key, e] of [...by].sort((a, b) => b[1].us - a[1].us).slice(0, 24)) {
    console.log(
      `  ${key.padEnd(28)} ${(e.calls / turns).toFixed(2)} a turn, ${(e.us / turns).toFixed(1)} µs a turn, ${(e.us / e.calls).toFixed(1)} µs a call`,
    );
  }
}
redis.disconnect();
