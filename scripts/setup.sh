#!/usr/bin/env bash
# Installs what psa needs to build and run on Debian/Ubuntu: Open MPI and libclang (rsmpi
# generates its MPI bindings with bindgen); elsewhere it finds them where they are (pkg-config,
# mpicc, llvm-config) or names what to install. Rust comes from rustup (https://rustup.rs), which
# this script does not install. Safe to run again: it installs only what is missing, and nothing
# (no apt-get, no sudo) when everything is there. A user who is not root and has no password-less
# sudo is told which packages to install.
set -euo pipefail

# Any of the glob patterns matches an existing file.
exists() {
    local pat
    for pat in "$@"; do
        compgen -G "$pat" >/dev/null && return 0
    done
    return 1
}

# Open MPI's headers, where rsmpi's build finds them: Debian's multiarch directories, else what
# pkg-config or the MPI compiler wrapper reports (modules, RHEL, a source build).
mpi_headers() {
    exists '/usr/lib/*/openmpi/include/mpi.h' '/usr/include/*/openmpi/mpi.h' && return 0
    { command -v pkg-config >/dev/null 2>&1 && { pkg-config --exists ompi || pkg-config --exists mpich; }; } ||
        mpicc -show >/dev/null 2>&1 || mpicc --showme >/dev/null 2>&1
}

# bindgen loads libclang.so* or libclang-<version>.so* (libclang-cpp, installed by other packages,
# is not it; LIBCLANG_PATH points it elsewhere) and needs clang's own headers.
libclang() {
    local llvm=/nonexistent
    command -v llvm-config >/dev/null 2>&1 && llvm=$(llvm-config --libdir 2>/dev/null || echo /nonexistent)
    exists "${LIBCLANG_PATH:-/nonexistent}/libclang*.so*" "$llvm/libclang.so*" "$llvm/libclang-[0-9]*.so*" \
        '/usr/lib/*/libclang.so*' '/usr/lib/*/libclang-[0-9]*.so*' '/usr/lib64/libclang.so*' \
        '/usr/lib/llvm-*/lib/libclang.so*' '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*'
}
clang_headers() {
    local llvm=/nonexistent
    command -v llvm-config >/dev/null 2>&1 && llvm=$(llvm-config --libdir 2>/dev/null || echo /nonexistent)
    exists "$llvm/clang/*/include/stddef.h" '/usr/lib/llvm-*/lib/clang/*/include/stddef.h' \
        '/usr/lib/clang/*/include/stddef.h' '/usr/lib64/clang/*/include/stddef.h'
}

missing() {
    need=()
    command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
    mpi_headers || need+=(libopenmpi-dev)
    libclang || need+=(libclang1-14)
    clang_headers || need+=(libclang-common-14-dev)
}

missing
if [ ${#need[@]} -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || {
        echo "setup.sh: error: missing ${need[*]} (Debian/Ubuntu package names) and there is no apt-get:" \
            "install Open MPI (mpirun, mpicc and its headers) and libclang with this system's packages" \
            "or modules (for example: module load openmpi llvm), then run this script again" >&2
        exit 1
    }
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        # Only a sudo that works without asking: this script may run where nobody can type a password.
        if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
            sudo=(sudo -n)
        else
            echo "setup.sh: missing: ${need[*]}" >&2
            echo "setup.sh: error: not root and no password-less sudo; as root, run:" >&2
            echo "    apt-get update && apt-get install -y ${need[*]}" >&2
            echo "setup.sh: then run this script again." >&2
            exit 1
        fi
    fi
    echo "setup.sh: installing ${need[*]}"
    install() {
        "${sudo[@]+"${sudo[@]}"}" apt-get update &&
            "${sudo[@]+"${sudo[@]}"}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
    }
    # A concurrent apt run can delete downloaded packages: retry once.
    install || { sleep 15; install; }
    missing
    if [ ${#need[@]} -gt 0 ]; then
        echo "setup.sh: error: still missing after the install: ${need[*]}" >&2
        exit 1
    fi
fi
if ! command -v cargo >/dev/null 2>&1 && [ -f "${HOME:-/nonexistent}/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "${HOME:-/nonexistent}/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "setup.sh: cargo not found: install Rust from https://rustup.rs" >&2; exit 1; }
echo "setup.sh: ready ($(cargo --version); $(mpirun --version | head -n 1))"
