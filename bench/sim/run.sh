#!/usr/bin/env bash
# Simulator benchmark: single-thread requests per second per policy on a seeded Zipf trace
# (10 M requests over 1 M objects by default) and heap bytes per cached object.
# Not a test. Extra arguments go to the benchmark, e.g.:
#   bench/sim/run.sh --policies lru,s3-fifo --requests 20000000 --sizes 1,10
# Results are recorded in docs/sim.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cargo run --quiet --release -p sluice-eval --example sim_bench -- "$@"
