#!/bin/bash
# conda-build's build script for psa (see meta.yaml): installs the `psa` binary into $PREFIX.
set -euxo pipefail

# mpi-sys finds Open MPI through its compiler wrapper (the host environment's); bindgen finds
# libclang in the build environment.
export MPICC="${PREFIX}/bin/mpicc"
export LIBCLANG_PATH="${BUILD_PREFIX}/lib"

# The licenses of every crate linked in, as bioconda asks of Rust packages.
cargo-bundle-licenses --format yaml --output THIRDPARTY.yml

cargo install --locked --no-track --root "${PREFIX}" --path .
