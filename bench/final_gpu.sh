#!/usr/bin/env bash
# Last H100 call of the session: the overhead benchmarks, the launch steps, then the full suite
# against the carried tuning cache (bench/issue5_final.sh without its tests).
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
python3 bench/overhead.py --backend cuda --json $OUT/overhead.json
python3 bench/launch_micro.py
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
mkdir -p $OUT/tuning && cp .tuning_h100/tuning.json $OUT/tuning/
python3 bench/suite.py --suite full --tune --json $OUT/full.json --md $OUT/full.md --plot $OUT/full.png | tail -72
