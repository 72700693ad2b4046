#!/usr/bin/env bash
# Bundles two builds of Tollway for turn-cost-ab.sh on a many-core host that has neither Node nor Redis:
# this machine's node and redis-server with every library they load (and the loader, so the host's glibc
# does not matter), and each build's gateway and session service deployed with their production
# dependencies (files the two share are stored once), plus the instant engine and the turn load beside
# this file. Each checkout must be built (pnpm build). The archive (about 40 MB) unpacks to bundle/.
# Usage: bench/host/pack-ab.sh NEW_CHECKOUT BASE_CHECKOUT OUT.tar.xz
set -euo pipefail
new=$(cd "${1:?usage: pack-ab.sh NEW BASE OUT.tar.xz}" && pwd); base=$(cd "${2:?}" && pwd); out=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); b=$work/bundle; mkdir -p "$b/bin" "$b/lib"
cp "$(readlink -f "$(command -v node)")" "$b/bin/node"
cp "$(readlink -f "$(command -v redis-server)")" "$b/bin/redis-server"
for f in "$b"/bin/*; do ldd "$f" | awk '$3 ~ /^\//{print $3}'; done | sort -u | while read -r l; do cp -L "$l" "$b/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$b/lib/"
for build in new base; do
  dir=$new; [ "$build" = base ] && dir=$base
  (cd "$dir" && pnpm --filter @tollway/inference-gateway deploy --prod "$b/$build/gw" >/dev/null)
  (cd "$dir" && pnpm --filter @tollway/agent-session deploy --prod "$b/$build/sess" >/dev/null)
  rm -rf "$b/$build"/{gw,sess}/{src,test,docs}
done
find "$b" -name '*.map' -delete -o -name '*.d.ts' -delete -o -name '*.md' -delete 2>/dev/null || true
hardlink -q "$b" >/dev/null 2>&1 || true
cp "$here/turn-cost-ab.sh" "$here/instant-engine.mjs" "$here/turn-load.mjs" "$here/slowlog.mjs" "$b/"
tar -cJf "$out" -C "$work" bundle
rm -rf "$work"
ls -la "$out"
