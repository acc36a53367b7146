#!/usr/bin/env bash
# Admission with and without replica acknowledgement (--admit-ack), in five
# alternating pairs on one Sentinel setup: a primary and a replica (AOF
# everysec) and three Sentinels on loopback ports 6501-6502 and 26501-26503,
# `seckill serve --relay=false` on the Sentinel URL, and a 30,000 / 20,000
# admission-only bench per run (docs/performance.md, "Replica acknowledgement").
#
#   OUT=DIR BIN=seckill PGURL=postgres://… bench/ack-pairs.sh
#
# Needs redis-server, redis-sentinel, psql, jq, curl. Every process it starts
# is stopped when it ends; the database `ackpairs` is made anew.
set -u
W=${OUT:?set OUT, a directory for the runs}; BIN=${BIN:?set BIN, the seckill binary}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
P=6501; R=6502; S=(26501 26502 26503); API=18181
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
rm -rf $W/data; mkdir -p $W/data
redis-server --port $P --bind 127.0.0.1 --dir $W/data --appendonly yes --appendfilename p.aof --appendfsync everysec --save '' --logfile $W/p.log & pids+=($!)
sleep 0.5
redis-server --port $R --bind 127.0.0.1 --dir $W/data --appendonly yes --appendfilename r.aof --appendfsync everysec --save '' --replicaof 127.0.0.1 $P --logfile $W/r.log & pids+=($!)
for s in "${S[@]}"; do
  printf 'port %s\nbind 127.0.0.1\nsentinel monitor seckill 127.0.0.1 %s 2\nsentinel down-after-milliseconds seckill 5000\n' $s $P > $W/data/s$s.conf
  redis-sentinel $W/data/s$s.conf --logfile $W/s$s.log & pids+=($!)
done
until redis-cli -p $P info replication | grep -q 'connected_slaves:1'; do sleep 0.2; done
sleep 2
export SECKILL_JWT_SECRET=ackpairs-secret-ackpairs-secret-ackpairs
export REDIS_ADDR="redis://127.0.0.1:${S[0]}/0?master_name=seckill&addr=127.0.0.1:${S[1]}&addr=127.0.0.1:${S[2]}"
psql "$PGURL" -qAtc "DROP DATABASE IF EXISTS ackpairs WITH (FORCE)" -c "CREATE DATABASE ackpairs"
export DATABASE_URL=$(python3 -c "import sys,urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path='/ackpairs')))" "$PGURL")
$BIN migrate --skip-temporal >/dev/null 2>&1 || $BIN migrate >/dev/null
for i in 1 2 3 4 5; do
  for ack in none replica; do
    redis-cli -p $P flushall >/dev/null; redis-cli -p $P wait 1 1000 >/dev/null
    SECKILL_ADMIT_ACK=$ack $BIN serve --relay=false --http-addr 127.0.0.1:$API > $W/serve-$i-$ack.log 2>&1 &
    sp=$!
    until curl -fsS -o /dev/null http://127.0.0.1:$API/healthz 2>/dev/null; do sleep 0.2; done
    load=$(cut -d' ' -f1-2 /proc/loadavg)
    $BIN bench --target http://127.0.0.1:$API --users 30000 --stock 20000 --admission-only --engine-workflows 0 --json > $W/$i-$ack.json 2> $W/bench-$i-$ack.log
    echo "pair $i $ack load $load: $(jq -r '"\(.admission_seconds) s, p99 \(.latency.p99_ms) ms, \(.outcomes)"' $W/$i-$ack.json)"
    kill $sp; wait $sp 2>/dev/null
  done
done
