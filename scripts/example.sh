#!/usr/bin/env bash
# Sets up, builds, and runs psa on the built-in example (tests/data/example.txt: 96 KiB of human
# chromosome X) on 4 pes with the distributed checker, then compares the output with libsais'.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
[ -f "${HOME:-/nonexistent}/.cargo/env" ] && . "${HOME:-/nonexistent}/.cargo/env"
cargo build --release --bin psa --example sais-baseline
# Open MPI refuses root and more pes than cores without these (harmless otherwise).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for algo in dc3 css; do
    # --base-case 1024: solve all but the last kilobyte distributedly (the default gathers inputs
    # below 4 Mi characters on one pe, which is faster but shows less).
    mpirun -n 4 target/release/psa --algo "$algo" --base-case 1024 --check -o "$out/example.$algo.sa" tests/data/example.txt
done
target/release/examples/sais-baseline -o "$out/example.libsais.sa" tests/data/example.txt >/dev/null
cmp "$out/example.dc3.sa" "$out/example.libsais.sa"
cmp "$out/example.css.sa" "$out/example.libsais.sa"
echo "example: dc3 and css on 4 pes match libsais ($(stat -c %s tests/data/example.txt) characters, $(stat -c %s "$out/example.css.sa") bytes of SA)"
