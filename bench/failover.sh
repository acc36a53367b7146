#!/usr/bin/env bash
# Selling through a failover (docs/reliability.md, "Selling through a
# failover"): a 30,000 buyers / 20,000 units wave against
# `seckill serve --admit-ack=replica` and `seckill worker` on a Sentinel URL,
# in docker-compose.yml's shape of Redis (a primary with AOF everysec, its
# replicas, min-replicas-to-write 1 with min-replicas-max-lag 2 on every
# server, three Sentinels, quorum two). KILL_AT seconds into the wave the
# primary is SIGKILLed; RESTART_AFTER seconds later it is started again on
# its own AOF (Sentinel makes it a replica of the new primary). The buyers
# retry every 503 with its Idempotency-Key as Retry-After asks
# (`seckill bench --retry-unavailable --retry-for RETRY_FOR`), and each
# run's JSON reports the window of 503 answers, their codes, the units left
# unsold and every 202 checked by its order id. RUNS rounds, each a run per
# number of replicas in SHAPES, alternating; everything is made anew for
# each run (Redis, Sentinels, a Temporal server on SQLite, the database).
#
#   OUT=DIR BIN=seckill PGURL=postgres://… [SHAPES="1 2"] [RUNS=2] bench/failover.sh
#
# Loopback ports 6511-6513 (Redis), 26511-26513 (Sentinel), 18191 (api),
# 19191 (api metrics) and 17291 (Temporal). Needs redis-server,
# redis-sentinel, psql, jq, curl, python3. Every process it starts is
# stopped when it ends; the database `failover` is made anew each run.
set -u
W=${OUT:?set OUT, a directory for the runs}; BIN=${BIN:?set BIN, the seckill binary}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
SHAPES=${SHAPES:-1 2}; RUNS=${RUNS:-2}
DOWN_AFTER=${DOWN_AFTER:-5000}         # Sentinel's down-after-milliseconds, docker-compose.yml's
KILL_AT=${KILL_AT:-3}; RESTART_AFTER=${RESTART_AFTER:-8}; RETRY_FOR=${RETRY_FOR:-60s}
USERS=${USERS:-30000}; STOCK=${STOCK:-20000}
P=6511; REPLICA_PORTS=(6512 6513); S=(26511 26512 26513); API=18191; METRICS=19191; TPORT=17291
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait "${pids[@]}" 2>/dev/null; pids=(); }
trap stop_all EXIT
wait_line() { for _ in $(seq $(( $3 * 10 ))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no '$2' in $1" >&2; return 1; }
bounds=(--appendonly yes --appendfsync everysec --save '' --min-replicas-to-write 1 --min-replicas-max-lag 2)
export SECKILL_JWT_SECRET=failover-secret-failover-secret-failover
export REDIS_ADDR="redis://127.0.0.1:${S[0]}/0?master_name=seckill&addr=127.0.0.1:${S[1]}&addr=127.0.0.1:${S[2]}"
export DATABASE_URL=$(python3 -c "import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path='/failover')))" "$PGURL")
export TEMPORAL_ADDRESS=127.0.0.1:$TPORT SECKILL_LOG_LEVEL=warn

# run NAME REPLICAS: one wave through one primary kill.
run() {
  local name=$1 n=$2 d=$W/$1
  rm -rf "$d"; mkdir -p "$d/data"
  redis-server --port $P --bind 127.0.0.1 --dir "$d/data" --appendfilename p.aof "${bounds[@]}" --logfile "$d/p.log" &
  local primary=$!; pids+=($!)
  sleep 0.5
  for r in "${REPLICA_PORTS[@]:0:$n}"; do
    redis-server --port "$r" --bind 127.0.0.1 --dir "$d/data" --appendfilename "r$r.aof" "${bounds[@]}" --replicaof 127.0.0.1 $P --logfile "$d/r$r.log" & pids+=($!)
  done
  for s in "${S[@]}"; do
    printf 'port %s\nbind 127.0.0.1\nsentinel monitor seckill 127.0.0.1 %s 2\nsentinel down-after-milliseconds seckill %s\nsentinel failover-timeout seckill 30000\nsentinel parallel-syncs seckill 1\n' \
      "$s" $P "$DOWN_AFTER" > "$d/data/s$s.conf"
    redis-sentinel "$d/data/s$s.conf" --logfile "$d/s$s.log" & pids+=($!)
  done
  # Every replica online (not still loading its first copy), or the
  # primary answers NOREPLICAS and serve's first write fails.
  until [ "$(redis-cli -p $P info replication | grep -c 'state=online')" = "$n" ]; do sleep 0.2; done
  until [ "$(redis-cli -p "${S[0]}" sentinel replicas seckill 2>/dev/null | grep -c '^name$')" = "$n" ]; do sleep 0.2; done
  "$BIN" temporal --port $TPORT --ui-port=-1 --data-dir "$d/temporal" > "$d/temporal.log" 2>&1 & pids+=($!)
  wait_line "$d/temporal.log" "temporal ready" 120 || return 1
  PGOPTIONS='-c client_min_messages=warning' psql "$PGURL" -qAtc "DROP DATABASE IF EXISTS failover WITH (FORCE)" -c "CREATE DATABASE failover"
  "$BIN" migrate > "$d/migrate.log" 2>&1 || return 1
  SECKILL_RELAY=false SECKILL_ADMIT_ACK=replica SECKILL_METRICS_ADDR=127.0.0.1:$METRICS "$BIN" serve --http-addr 127.0.0.1:$API > "$d/serve.log" 2>&1 & pids+=($!)
  local serve=$!
  SECKILL_WORKER_RELAY=true SECKILL_ADMIT_ACK=replica SECKILL_METRICS_ADDR=127.0.0.1:0 "$BIN" worker > "$d/worker.log" 2>&1 & pids+=($!)
  until curl -fsS -o /dev/null http://127.0.0.1:$API/readyz 2>/dev/null; do
    kill -0 $serve 2>/dev/null || { echo "$name: serve exited, see $d/serve.log" >&2; stop_all; return 1; }
    sleep 0.2
  done
  local load; load=$(cut -d' ' -f1-3 /proc/loadavg)
  "$BIN" bench --target http://127.0.0.1:$API --metrics-url http://127.0.0.1:$METRICS/metrics --users "$USERS" --stock "$STOCK" \
    --engine-workflows 0 --start-delay 5s --retry-unavailable --retry-for "$RETRY_FOR" --json > "$W/$name.json" 2> "$d/bench.log" &
  local bench=$!
  # The wave begins when the sale opens: the kill is timed from its starts_at.
  local starts=""
  until starts=$(curl -fsS "http://127.0.0.1:$API/v1/sales?limit=1" 2>/dev/null | jq -r '.[0].starts_at // empty') && [ -n "$starts" ]; do sleep 0.2; done
  python3 -c "import sys,time,datetime as d; t=d.datetime.fromisoformat(sys.argv[1].replace('Z','+00:00')).timestamp()+float(sys.argv[2]); time.sleep(max(0,t-time.time()))" "$starts" "$KILL_AT"
  kill -9 $primary; date +%s.%N > "$d/killed"; wait $primary 2>/dev/null
  sleep "$RESTART_AFTER"
  redis-server --port $P --bind 127.0.0.1 --dir "$d/data" --appendfilename p.aof "${bounds[@]}" --logfile "$d/p.log" & pids+=($!)
  date +%s.%N > "$d/restarted"
  wait $bench
  python3 - "$W/$name.json" "$name" "$n" "$load" "$(cat "$d/killed")" "$(cat "$d/restarted")" <<'PY'
import json, re, sys, datetime as dt
f, name, n, load, killed, restarted = sys.argv[1:]
r = json.load(open(f))
began = dt.datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", r["admission_started_at"]).replace("Z", "+00:00")).timestamp()
u, lost = r.get("unavailable") or {}, r.get("lost_202s") or {}
print(f"{name}: {n} replica(s), load {load}: killed at {float(killed)-began:.2f} s, restarted at {float(restarted)-began:.2f} s; "
      f"503s {u.get('first_seconds', 0):.2f}-{u.get('last_seconds', 0):.2f} s ({u.get('span_seconds', 0):.2f} s) {u.get('answers')}; "
      f"{u.get('retries')} retries, {u.get('gave_up')} gave up; {r['accepted']} x 202, {r.get('held_unconfirmed', 0)} held unconfirmed, {u.get('units_unsold')} unsold; "
      f"lost {lost.get('lost', '?')} of {lost.get('checked', '?')}; outcomes {r['outcomes']}; invariants {r['invariants_ok']} {r.get('violations') or ''}")
PY
  stop_all
}

mkdir -p "$W"
for i in $(seq "$RUNS"); do
  for n in $SHAPES; do run "$i-r$n" "$n" || stop_all; done
done
