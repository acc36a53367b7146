#!/usr/bin/env bash
# Alternating pairs of `seckill bench` runs on the two shapes of
# docs/performance.md, on this machine's loopback: how a lever is measured
# (old and new binary in turn, in one session, ratios with the load
# average beside them).
#
#   bench/shapes.sh run SHAPE BIN OUT [bench flags…]
#   bench/shapes.sh pairs N SHAPE OLD_BIN NEW_BIN OUTDIR [bench flags…]
#   bench/pairs.py OUTDIR    (the ratios of the pairs, with load averages)
#
# SHAPE is `dev` (one `seckill dev` process: Temporal on SQLite in a data
# directory, one shard) or `topology` (docker-compose's shape: Temporal on
# Postgres as two processes of one cluster, frontend+matching and
# history+worker, 8 shards; `seckill serve` with its relay off and
# `seckill worker --relay`). Both use the Postgres at $PGURL (a server URL
# whose user may create databases; fresh databases each run, dropped after)
# and a Redis of their own on a free port. The bench is always NEW_BIN's
# (or BIN's), so that both sides are measured by the same load generator;
# --cpu names every process of the shape and --pg every database, so the
# JSON has CPU and Postgres writes per order for each phase of the order's
# life. Each run's JSON goes to OUT (pairs: OUTDIR/<i>-<old|new>.json);
# `bench/shapes.sh summary OUTDIR` prints the pairs side by side.
#
# Orders pay at the built-in payment provider (the api's /pay/), as a buyer
# pays: the bench's --pay loads each payment's hosted page and submits its
# Pay form, and an order is PAID when the provider's notification reaches
# its workflow. PAYMENT_PROVIDER=none measures the pay that decides PAID by
# itself (the only way builds before the provider pay). It goes to every
# process as SECKILL_PAYMENT_PROVIDER, which those older builds ignore: a
# pair of an older build against a newer one then pays two ways, and the
# pay phase's JSON says which (phases[].payment, absent for none).
#
# TEMPORAL_ARGS are more flags of the topology's `seckill temporal`
# processes (e.g. "--visibility-indexes trimmed"); in pairs, OLD_TEMPORAL_ARGS
# and NEW_TEMPORAL_ARGS are each side's, so that one binary can be measured
# against itself with and without an option:
#   OLD_TEMPORAL_ARGS="--visibility-indexes full" NEW_TEMPORAL_ARGS="--visibility-indexes trimmed" \
#     bench/shapes.sh pairs 5 topology BIN BIN OUTDIR
#
# Needs: redis-server, psql (postgresql-client), jq. Loopback only; every
# process it starts is stopped when the run ends.
set -euo pipefail

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
SECRET=${SECKILL_JWT_SECRET:-shapes-secret-shapes-secret-shapes-secret}
export SECKILL_JWT_SECRET=$SECRET
# The built-in provider's secrets, shared by serve and worker (dev would
# make its own); loopback only, like everything here.
export SECKILL_PAYMENT_PROVIDER=${PAYMENT_PROVIDER:-builtin}
export SECKILL_BUILTINPAY_SECRET_KEY=${SECKILL_BUILTINPAY_SECRET_KEY:-shapes-builtinpay-key-shapes-builtinpay-key}
export SECKILL_BUILTINPAY_WEBHOOK_SECRET=${SECKILL_BUILTINPAY_WEBHOOK_SECRET:-shapes-builtinpay-hook-shapes-builtinpay-hook}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
db_url() { # db_url NAME: $PGURL with its database replaced
  python3 - "$PGURL" "$1" <<'PY'
import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))
PY
}
psql_admin() { psql "$PGURL" -v ON_ERROR_STOP=1 -qAt -c "$1"; }
log() { printf '[shapes %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

wait_http() { # wait_http URL SECONDS
  for _ in $(seq $(( $2 * 10 ))); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  log "$1 did not answer within $2 s"; return 1
}
wait_line() { # wait_line FILE PATTERN SECONDS
  for _ in $(seq $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  log "no '$2' in $1 within $3 s"; return 1
}

# run SHAPE BIN OUT [bench flags…]
run() {
  local shape=$1 bin=$2 out=$3; shift 3
  local benchbin=${BENCH_BIN:-$bin}
  local w; w=$(mktemp -d /tmp/seckill-shapes.XXXXXX)
  local pids=() tag; tag="s$(date +%s%N | tail -c 9)"
  local dbs=("seckill_$tag")
  cleanup() {
    set +e
    trap - RETURN # once: not again when the caller returns, where $w is gone
    # bash may still run it at the caller's return, the run's locals gone:
    # then there is nothing left to clean.
    [ -n "${w:-}" ] || return 0
    for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; kill -9 "$p" 2>/dev/null; done
    for d in "${dbs[@]}"; do psql_admin "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1; done
    rm -rf "$w"
  }
  trap cleanup RETURN
  local redis_port api_port metrics_port; redis_port=$(free_port); api_port=$(free_port); metrics_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$w/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  psql_admin "CREATE DATABASE ${dbs[0]}"
  local seckill_db; seckill_db=$(db_url "${dbs[0]}")
  export DATABASE_URL=$seckill_db REDIS_ADDR=127.0.0.1:$redis_port SECKILL_HTTP_ADDR=127.0.0.1:$api_port
  # The worker reaches the built-in provider at the api (serve's own default).
  export SECKILL_BUILTINPAY_URL=http://127.0.0.1:$api_port/pay/
  local cpu=(--cpu redis=redis --cpu postgres=comm:postgres) pg=(--pg "seckill=$seckill_db")
  case $shape in
    dev)
      SECKILL_METRICS_ADDR=127.0.0.1:$metrics_port "$bin" dev --data-dir "$w/dev" --seed-stock=0 --temporal-port=0 --ui-port=-1 >"$w/dev.log" 2>&1 &
      pids+=($!); cpu+=(--cpu "dev=pid:$!")
      ;;
    topology)
      local tdb="temporal_$tag" tport; tport=$(free_port)
      dbs+=("$tdb" "${tdb}_visibility")
      local store=(--postgres-url "$(db_url "$tdb")" --history-shards 8) targs=()
      read -r -a targs <<<"${TEMPORAL_ARGS:-}"
      store+=("${targs[@]}")
      "$bin" temporal "${store[@]}" --services frontend,matching --port "$tport" --ui-port=-1 >"$w/front.log" 2>&1 &
      pids+=($!); cpu+=(--cpu "temporal_front=pid:$!")
      wait_line "$w/front.log" "temporal ready" 120
      "$bin" temporal "${store[@]}" --services history,worker --frontend-address "127.0.0.1:$tport" \
        --ip 0.0.0.0 --broadcast-address 127.0.0.1 >"$w/history.log" 2>&1 &
      pids+=($!); cpu+=(--cpu "temporal_history=pid:$!")
      wait_line "$w/history.log" "temporal ready" 120
      export TEMPORAL_ADDRESS=127.0.0.1:$tport
      "$bin" migrate >"$w/migrate.log" 2>&1
      SECKILL_RELAY=false SECKILL_METRICS_ADDR=127.0.0.1:$metrics_port "$bin" serve >"$w/serve.log" 2>&1 &
      pids+=($!); cpu+=(--cpu "serve=pid:$!")
      SECKILL_WORKER_RELAY=true SECKILL_METRICS_ADDR=127.0.0.1:0 "$bin" worker >"$w/worker.log" 2>&1 &
      pids+=($!); cpu+=(--cpu "worker=pid:$!")
      pg+=(--pg "temporal=$(db_url "$tdb")" --pg "visibility=$(db_url "${tdb}_visibility")")
      ;;
    *) log "unknown shape $shape (dev or topology)"; return 2 ;;
  esac
  wait_http "http://127.0.0.1:$api_port/readyz" 120
  # The api's /metrics: on its own listener since the metrics listener
  # came in, on the api port in builds before it.
  local metrics_url=http://127.0.0.1:$metrics_port/metrics
  curl -fsS -o /dev/null "http://127.0.0.1:$api_port/metrics" 2>/dev/null && metrics_url=http://127.0.0.1:$api_port/metrics
  log "$shape ready ($bin${TEMPORAL_ARGS:+, temporal $TEMPORAL_ARGS}, payments $SECKILL_PAYMENT_PROVIDER), bench: $*"
  local rc=0
  "$benchbin" bench --target "http://127.0.0.1:$api_port" --metrics-url "$metrics_url" --redis-addr "127.0.0.1:$redis_port" \
    "${cpu[@]}" "${pg[@]}" --json "$@" >"$out" || rc=$?
  log "$shape done (bench exit $rc): $out"
  return 0
}

# pairs N SHAPE OLD NEW OUTDIR [bench flags…]: old first, then new, N times.
pairs() {
  local n=$1 shape=$2 old=$3 new=$4 dir=$5; shift 5
  mkdir -p "$dir"
  for i in $(seq "$n"); do
    TEMPORAL_ARGS=${OLD_TEMPORAL_ARGS:-} BENCH_BIN=$new run "$shape" "$old" "$dir/$i-old.json" "$@"
    TEMPORAL_ARGS=${NEW_TEMPORAL_ARGS:-} BENCH_BIN=$new run "$shape" "$new" "$dir/$i-new.json" "$@"
  done
  summary "$dir"
}

# summary DIR: per run, each phase's orders/s and system CPU per order, the
# load average before it, and Postgres commits and WAL per order.
summary() {
  for f in "$1"/*.json; do
    jq -r --arg f "$(basename "$f")" '
      "\($f): invariants \(.invariants_ok), admission \(.admission_seconds|.*100|round/100) s, load \(.load_average_before)",
      (.phases[]? | "  \(.name): \(.orders) orders \(if .complete then "" else "(incomplete) " end)\(.orders_per_second|.*10|round/10)/s, cpu \((.cpu_ms_per_order.system // 0)|.*100|round/100) ms/order, load \(.load_average_before)" +
        ([.postgres // {} | to_entries[] | ", \(.key) \(.value.commits_per_order|.*10|round/10) commits \((.value.wal_bytes_per_order/1000)|.*10|round/10) KB"] | join("")) +
        (if .payment then ", at \(.payment.provider): pay p99 \(.latency.p99_ms|round) ms, submit p99 \(.payment.submit_latency.p99_ms|round) ms, capture→PAID p50/p99 " +
          (.payment.capture_to_paid // null | if . then "\(.p50_ms|round)/\(.p99_ms|round) ms" else "–" end) else "" end))' "$f"
  done
}

cmd=${1:-}; shift || true
case $cmd in
  run) run "$@" ;;
  pairs) pairs "$@" ;;
  summary) summary "$@" ;;
  *) sed -n '2,41p' "$0"; exit 2 ;;
esac
