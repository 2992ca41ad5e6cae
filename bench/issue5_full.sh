#!/usr/bin/env bash
# Issue 5 on the H100: the full suite with tuning for the dtypes given ($1, e.g. float16,bfloat16),
# preceded by the overhead benchmarks when $2 = overhead. JSON is rewritten after every row, so a
# run cut short by the time limit keeps what it measured.
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
# A tuning cache carried from an earlier call (.tuning_h100/, ignored by git) is reused.
if [ -f .tuning_h100/tuning.json ] && [ ! -f $OUT/tuning/tuning.json ]; then mkdir -p $OUT/tuning && cp .tuning_h100/tuning.json $OUT/tuning/; fi
tag=$(echo "$1" | tr ',' '_')
t0=$(date +%s)
if [ "${2:-}" = overhead ]; then
  python3 bench/overhead.py --backend cuda --json $OUT/overhead.json
  python3 -m gemm_engine run --dtype bfloat16 --m 4096 --n 4096 --k 4096
  echo "elapsed $(( $(date +%s) - t0 )) s"
fi
python3 bench/suite.py --suite full --dtypes "$1" --tune ${3:-} --json $OUT/full_$tag.json --md $OUT/full_$tag.md --plot $OUT/full_$tag.png
echo "elapsed $(( $(date +%s) - t0 )) s"
