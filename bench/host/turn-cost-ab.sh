#!/usr/bin/env bash
# A turn's Redis cost, two builds in the same run, on a many-core host (issue 39's benchmark of record).
# For each round and each build (base first, then new), a fresh platform: one Redis (core 0), the instant
# engine (core 1), 2 gateways (cores 2-3; the workers' service key), 3 session APIs (cores 4-6), W workers
# (cores 7.., concurrency 8, their agent processes on the worker's core), 3 load processes (the last 3
# cores, C clients each with a session of its own, one API each, send + long-poll). Prints each run's
# turns/s, round trip p50/p99, Redis CPU per turn (INFO used_cpu_sys + used_cpu_user), commands per
# turn, its reads of client sockets per turn (each a batch of one client's commands) and its wake-ups per turn
# (its voluntary context switches), then the medians and new / base.
# Runs in the folder pack-ab.sh made (bundle/).
# With SLOWLOG=1, each run then logs every command for 3 s more and prints Redis's own time per turn by
# command and by script (slowlog.mjs). BUILDS (default "base new") names the bundle's builds to run in each
# round, in order: a third build copied into the bundle beside them (e.g. "base old new") is measured too,
# though the medians compare base and new only.
# Usage: bundle/turn-cost-ab.sh (ROUNDS=2 SECS=10 W=6 C=64 OUT=dir SLOWLOG= BUILDS= from the environment)
set -u
P=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}; SECS=${SECS:-10}; W=${W:-6}; C=${C:-64}
L="$P/lib/ld-linux-x86-64.so.2 --library-path $P/lib"; NC=$(nproc)
if "$P/bin/node" -e 0 2>/dev/null; then NODE="$P/bin/node"; else NODE="$L $P/bin/node"; fi
core() { echo $(( ($1 % NC + NC) % NC )); }
echo "host: $NC cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); node $($NODE -v); W=$W workers x 8, 3 APIs, $((3 * C)) clients, ${SECS}s per run"
cat >"$OUT/catalog.yaml" <<Y
models:
  - id: mock/model
    owned_by: mock
    created: 1700000000
    capacity: 1000000
    price_per_million: { input: 0.1, output: 0.1 }
    engine:
      kind: openai-compatible
      replicas:
        - base_url: http://127.0.0.1:18001/v1
Y
rinfo() { exec 3<>/dev/tcp/127.0.0.1/6390; printf 'INFO all\r\nQUIT\r\n' >&3; cat <&3; exec 3<&-; }
rcpu() { rinfo | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%.4f", s}'; }
rcmd() { rinfo | awk -F: '/^total_commands_processed:/{gsub("\r","",$2); print $2}'; }
# Redis's reads of its clients' sockets: each a batch of commands one client wrote, however many.
rreads() { rinfo | awk -F: '/^total_reads_processed:/{gsub("\r","",$2); print $2}'; }
# Redis's wake-ups: its voluntary context switches (each ends a sleep in epoll_wait that commands ended).
rwake() { awk '/^voluntary_ctxt_switches:/{print $2}' "/proc/$1/status"; }
ready() { $NODE -e "fetch('$1').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; }
run() { # build round
  local B=$P/$1 pids=()
  taskset -c "$(core 0)" $L "$P/bin/redis-server" --port 6390 --save '' --appendonly no >"$OUT/redis-$1-$2.log" 2>&1 & pids+=($!)
  PORT=18001 taskset -c "$(core 1)" $NODE "$P/instant-engine.mjs" >/dev/null 2>&1 & pids+=($!)
  sleep 0.5
  local SK=svc-$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
  export REDIS_URL=redis://127.0.0.1:6390 REDIS_PREFIX=ab: LOG_LEVEL=warn
  for i in 1 2; do GATEWAY_PORT=1900$i CATALOG_PATH=$OUT/catalog.yaml SERVICE_API_KEYS=$SK taskset -c "$(core $((1 + i)))" $NODE "$B/gw/dist/main.js" >"$OUT/gw$i-$1-$2.log" 2>&1 & pids+=($!); done
  for i in 1 2 3; do SESSIONS_PORT=1910$i MAX_SESSIONS=1000000 taskset -c "$(core $((3 + i)))" $NODE "$B/sess/dist/main-api.js" >"$OUT/api$i-$1-$2.log" 2>&1 & pids+=($!); done
  for i in $(seq 1 120); do ready http://127.0.0.1:19001/readyz && ready http://127.0.0.1:19002/readyz && ready http://127.0.0.1:19101/readyz && ready http://127.0.0.1:19103/readyz && break; sleep 0.5; done
  local org KEY
  org=$(cd "$B/gw" && $NODE dist/cli/main-cli.js orgs create --name ab --requests 1000000000 --input-tokens 1000000000000 --output-tokens 1000000000000 --credit 100000000 | $NODE -pe 'JSON.parse(require("fs").readFileSync(0)).id')
  KEY=$(cd "$B/gw" && $NODE dist/cli/main-cli.js keys create "$org" | $NODE -pe 'JSON.parse(require("fs").readFileSync(0)).key')
  for w in $(seq 1 "$W"); do
    GATEWAY_BASE_URL=http://127.0.0.1:1900$(( (w - 1) % 2 + 1 ))/v1 GATEWAY_API_KEY=$SK AGENT_DEFAULT_MODEL=mock/model WORKER_CONCURRENCY=8 \
      taskset -c "$(core $((6 + w)))" $NODE "$B/sess/dist/main-worker.js" >"$OUT/worker$w-$1-$2.log" 2>&1 & pids+=($!)
  done
  sleep 3
  # warm-up, then the measured run (each load process makes its sessions first: not counted)
  local lp=() a
  for a in 1 2 3; do U=http://127.0.0.1:1910$a KEY=$KEY C=$C SECS=3 taskset -c "$(core $((NC - 4 + a)))" $NODE "$P/turn-load.mjs" >/dev/null 2>&1 & lp+=($!); done
  wait "${lp[@]}"; lp=()
  local c0 k0 w0 r0 t0 c1 k1 w1 r1 t1
  c0=$(rcpu); k0=$(rcmd); r0=$(rreads); w0=$(rwake "${pids[0]}"); t0=$(date +%s.%N)
  for a in 1 2 3; do U=http://127.0.0.1:1910$a KEY=$KEY C=$C SECS=$SECS taskset -c "$(core $((NC - 4 + a)))" $NODE "$P/turn-load.mjs" >"$OUT/load-$1-$2-$a.txt" 2>&1 & lp+=($!); done
  wait "${lp[@]}"
  t1=$(date +%s.%N); c1=$(rcpu); k1=$(rcmd); r1=$(rreads); w1=$(rwake "${pids[0]}")
  if [ -n "${SLOWLOG:-}" ]; then # Redis's own time by command and script, from a pass of its own
    BUILD=$B $NODE "$P/slowlog.mjs" start; lp=()
    for a in 1 2 3; do U=http://127.0.0.1:1910$a KEY=$KEY C=$C SECS=3 taskset -c "$(core $((NC - 4 + a)))" $NODE "$P/turn-load.mjs" >"$OUT/slow-$1-$2-$a.txt" 2>&1 & lp+=($!); done
    wait "${lp[@]}"
    BUILD=$B TURNS=$(cat "$OUT"/slow-$1-$2-*.txt | sed -n 's/.*turns=\([0-9]*\).*/\1/p' | awk '{s+=$1} END{print s}') $NODE "$P/slowlog.mjs" report | sed "s/^/$1 round $2 /" | tee -a "$OUT/slowlog.txt"
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; pkill -f turn-child 2>/dev/null; sleep 1
  cat "$OUT"/load-$1-$2-*.txt | awk -v b="$1" -v r="$2" -v c="$(awk "BEGIN{print $c1-$c0}")" -v k=$((k1 - k0)) -v rd=$((r1 - r0)) -v w=$((w1 - w0)) -v dt="$(awk "BEGIN{print $t1-$t0}")" -v secs="$SECS" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } n += v["turns"]; e += v["errors"]; if (v["p50"] > p50) p50 = v["p50"]; if (v["p99"] > p99) p99 = v["p99"] }
    END { printf "%s round %d: turns/s=%.0f worst_p50=%sms worst_p99=%sms errors=%d redis_cpu=%.0f%% redis_us/turn=%.1f redis_cmds/turn=%.1f redis_reads/turn=%.2f redis_wakeups/turn=%.2f\n", b, r, n / secs, p50, p99, e, 100 * c / dt, 1e6 * c / n, k / n, rd / n, w / n }' | tee -a "$OUT/runs.txt"
}
for r in $(seq 1 "$ROUNDS"); do for b in ${BUILDS:-base new}; do run "$b" "$r"; done; done
awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[2] != "") { x[$1, kv[1], ++n[$1, kv[1]]] = kv[2] + 0 } } }
  function med(b, f,   m, a, i, j, t) { m = n[b, f]; for (i = 1; i <= m; i++) a[i] = x[b, f, i]; for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END { split("turns/s redis_us/turn redis_cmds/turn redis_reads/turn redis_wakeups/turn", f, " "); for (k = 1; k <= 5; k++) printf "median %s: base %.1f, new %.1f, new / base %.3f\n", f[k], med("base", f[k]), med("new", f[k]), med("new", f[k]) / med("base", f[k]) }' "$OUT/runs.txt"
