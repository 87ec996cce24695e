#!/usr/bin/env bash
# GPU backend: build here, run on a GPU machine.
#
# The GPU machine (CUDA driver + NVRTC, Open MPI, no Rust) gets prebuilt binaries. This script
#   1. builds `psa` and the example `gpu-sort-bench` with --features gpu, and the GPU test
#      binary (tests/gpu.rs) without running it;
#   2. copies stripped binaries into .gpu-carry/ (ignored by git, see .gitignore), small
#      enough to copy quickly (the debug info makes the unstripped ones ~50 MB each);
#   3. prints the commands to run on the GPU machine.
#
# Usage: scripts/gpu-test.sh            build and print the run commands
#        scripts/gpu-test.sh --run      also run them here (on a machine that has a GPU)
#
# On the GPU machine, from the repository root (with .gpu-carry/ copied there):
#   .gpu-carry/gpu-tests --test-threads=1          GPU == CPU for every size/pattern; each test
#                                                  prints "skipped: no GPU" if there is none
#   .gpu-carry/gpu-sort-bench --sizes 1e8,1e9      GPU sort vs voracious_mt_sort (16 threads)
#   mpirun --allow-run-as-root -n 2 .gpu-carry/psa --gpu --check -o gpu.sa INPUT
#   mpirun --allow-run-as-root -n 2 .gpu-carry/psa --check -o cpu.sa INPUT && cmp gpu.sa cpu.sa
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --features gpu --bin psa --example gpu-sort-bench
# The test executable's path has a hash; cargo prints it with --message-format=json.
test_exe=$(cargo test --profile ci --features gpu --test gpu --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu" and m.get("executable"):
        print(m["executable"])' | tail -n 1)
if [[ -z "$test_exe" ]]; then
    echo "gpu-test.sh: could not locate the tests/gpu.rs executable" >&2
    exit 1
fi

mkdir -p .gpu-carry
strip -o .gpu-carry/psa target/release/psa
strip -o .gpu-carry/gpu-sort-bench target/release/examples/gpu-sort-bench
strip -o .gpu-carry/gpu-tests "$test_exe"
echo "test executable: $test_exe"
ls -l .gpu-carry

cat <<'EOF'

On the GPU machine (repository root, .gpu-carry/ copied there):
  .gpu-carry/gpu-tests --test-threads=1
  .gpu-carry/gpu-sort-bench --sizes 1e8,1e9 --threads 16
  mpirun --allow-run-as-root -n 2 .gpu-carry/psa --gpu --check -o gpu.sa INPUT
  mpirun --allow-run-as-root -n 2 .gpu-carry/psa --check -o cpu.sa INPUT && cmp gpu.sa cpu.sa
EOF

if [[ "${1:-}" == "--run" ]]; then
    .gpu-carry/gpu-tests --test-threads=1
    .gpu-carry/gpu-sort-bench --sizes 1e7 --threads "$(nproc)"
fi
