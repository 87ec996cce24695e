#!/usr/bin/env bash
# Installs what psa needs to build and run on Debian/Ubuntu: Open MPI and libclang (rsmpi
# generates its MPI bindings with bindgen). Rust comes from rustup (https://rustup.rs), which
# this script does not install. Safe to run again: it installs only what is missing.
set -euo pipefail

need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/openmpi/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || need+=(libopenmpi-dev)
# bindgen loads libclang.so* or libclang-<version>.so*; libclang-cpp (installed by other packages) is not it.
ls /usr/lib/x86_64-linux-gnu/libclang.so* /usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so* /usr/lib/llvm-*/lib/libclang.so* \
    /usr/lib/llvm-*/lib/libclang-[0-9]*.so* >/dev/null 2>&1 || need+=(libclang1-14 libclang-common-14-dev)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    install() { $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"; }
    # A concurrent apt run can delete downloaded packages: retry once.
    install || { sleep 15; install; }
fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "setup.sh: cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
echo "setup.sh: ready ($(cargo --version); $(mpirun --version | head -n 1))"
