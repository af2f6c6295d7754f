#!/usr/bin/env bash
# `make run`: the whole pipeline on one machine, from a fresh ledger.
#   1. the aggregator starts an embedded NATS server from nats.conf
#      (127.0.0.1:4222, store under $RUN_DIR) and projects the stream;
#   2. a simulated fleet calls a fake provider through the retry middleware
#      with the real SDK clients, with rate limits, overloads, 5xx, billed
#      timeouts and permanent 400s, publishing every attempt;
#   3. 4 processes call one fake provider with a tier limit, with the
#      fleet's limits off, then on (fewer 429s);
#   4. we wait until the ledger has applied every event, print the report,
#      verify it against a recomputation from the stream;
#   5. the wrong-price story: the ledger was priced with a catalog whose
#      gpt-4.1-mini input price is ten times too high; the fixed catalog is
#      loaded, verify reports the drift in money, a rebuild re-prices the
#      whole history, verify says identical; then we stop the aggregator
#      with SIGTERM (it finishes its batch and exits).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
RUN_DIR=${RUN_DIR:-data/run}
URL=nats://127.0.0.1:4222
SIM_FLAGS=${SIM_FLAGS:---agents 8 --sessions 16 --calls 20 --seed 42}
FLEET_TIER=${FLEET_TIER:---tier-rpm 1200 --tier-itpm 1200000}
FLEET_FLAGS=${FLEET_FLAGS:---agents 2 --sessions 8 --calls 8 --seed 42 --providers anthropic,openai --rate-limit 0 --overload 0 --server-error 0 --billed-timeout 0 --bad-request 0 $FLEET_TIER}

if (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  echo "run: something already listens on 127.0.0.1:4222 (another aggregator?); stop it first" >&2
  exit 1
fi

rm -rf "$RUN_DIR"
mkdir -p "$RUN_DIR"

# A user's catalog over the built-in one: the built-in catalog prices the
# models the simulated fleet calls (claude-sonnet-4-5, gpt-4.1-mini,
# gemini-2.5-flash, from the providers' pages); this file overrides
# gpt-4.1-mini's entry (same provider, model, tier and effective date)
# with its input price entered wrong ($4.00 per million tokens instead of
# $0.40: the LiteLLM #9833 kind of slip), then corrects it.
prices() {
  cat <<JSON
{"entries": [
 {"provider": "openai", "model": "gpt-4.1-mini", "effective_from": "2025-04-14", "input": "$1", "output": "1.60", "cache_read": "0.10",
  "source": "https://openai.com/index/gpt-4-1/", "read_on": "2026-12-04"}
]}
JSON
}
prices 4.00 >"$RUN_DIR/prices-wrong.json"
prices 0.40 >"$RUN_DIR/prices.json"
echo "== loading the price catalog (with gpt-4.1-mini's input price wrong)"
"$BIN/aggregator" prices load --store-dir "$RUN_DIR" --log-level warn "$RUN_DIR/prices-wrong.json"

echo "== starting the aggregator (embedded NATS, store in $RUN_DIR)"
"$BIN/aggregator" run --store-dir "$RUN_DIR" --log-level warn 2>"$RUN_DIR/aggregator.log" &
agg=$!
stop_agg() {
  if kill -0 "$agg" 2>/dev/null; then
    kill -TERM "$agg"
    wait "$agg" || { echo "run: the aggregator exited with an error; see $RUN_DIR/aggregator.log" >&2; return 1; }
  fi
}
trap 'stop_agg || true' EXIT

for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break
  kill -0 "$agg" 2>/dev/null || { cat "$RUN_DIR/aggregator.log" >&2; exit 1; }
  sleep 0.1
done

echo "== simulating a fleet: $SIM_FLAGS"
# --create-stream: the aggregator may not have created it yet (same settings).
# shellcheck disable=SC2086
"$BIN/publisher" simulate --nats-url "$URL" --create-stream $SIM_FLAGS --truth "$RUN_DIR/truth.json"

# The fleet: the same calls from 4 processes that share one provider
# organization with a tier limit, first each process with its own limits,
# then with the fleet's (one capacity, learned from the rate-limit
# headers, in NATS KV ledger_upstreams; docs/fleet.md).
echo "== 4 processes against one tier limit ($FLEET_TIER): fleet limits off, then on"
for limits in off on; do
  # shellcheck disable=SC2086
  "$BIN/publisher" simulate --nats-url "$URL" --create-stream --processes 4 $FLEET_FLAGS --fleet-limits "$limits" --progress 0 \
    | grep -E '^(run|calls|attempts|fleet|provider) '
done

echo "== waiting for the aggregator to catch up"
"$BIN/aggregator" wait --nats-url "$URL" --timeout 60s

echo "== the ledger (usage = winning attempts; billed = every attempt; overhead = billed - usage)"
"$BIN/aggregator" report --nats-url "$URL"

echo "== verifying the ledger against a recomputation from the stream"
"$BIN/aggregator" verify --nats-url "$URL"

echo "== the wrong price fixed: loading the catalog with gpt-4.1-mini at \$0.40 per million input tokens"
"$BIN/aggregator" prices load --nats-url "$URL" "$RUN_DIR/prices.json"
"$BIN/aggregator" prices --nats-url "$URL"
echo "== verify: the recorded money drifts from the fixed catalog's (exit 1 expected)"
if "$BIN/aggregator" verify --nats-url "$URL" --limit 6; then
  echo "run: verify found no drift in money after the price was fixed" >&2
  exit 1
fi
echo "== rebuild: the whole history re-priced with the fixed catalog, live"
"$BIN/aggregator" rebuild --nats-url "$URL"
"$BIN/aggregator" wait --nats-url "$URL" --timeout 60s
echo "== verify after the rebuild"
"$BIN/aggregator" verify --nats-url "$URL"
echo "== the ledger in money, re-priced"
"$BIN/aggregator" report --nats-url "$URL"

stop_agg
trap - EXIT
echo "== stopped cleanly; the ledger is in $RUN_DIR (aggregator report --store-dir $RUN_DIR to read it again)"
