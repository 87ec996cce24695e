#!/usr/bin/env python3
"""scripts/nvrtc-check.py — compile psa's CUDA kernels with NVRTC on a machine without a GPU.

psa compiles src/local/gpu/kernels.cu + saca.cu at run time with NVRTC (src/local/gpu/kernels.rs), so a
kernel that does not compile would only show up on the GPU host. This script compiles the same
source with the same options, for every architecture listed, and fails with NVRTC's log if any
compilation fails. It needs only libnvrtc, which it takes from the `nvidia-cuda-nvrtc` wheel on
PyPI (downloaded once into .bench-tmp/nvrtc/, ~60 MB) unless --lib names one.

    python3 scripts/nvrtc-check.py [--lib PATH/libnvrtc.so.13] [--arch 80,90]

Exit 0: every architecture compiled; 1: a compilation failed; 2: NVRTC could not be had.
"""
import argparse
import ctypes
import glob
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".bench-tmp", "nvrtc")
# The same concatenation as `KERNELS` in src/local/gpu/kernels.rs.
SOURCES = ["src/local/gpu/kernels.cu", "src/local/gpu/saca.cu"]


def fetch_lib():
    libs = glob.glob(os.path.join(CACHE, "**", "libnvrtc.so.*"), recursive=True)
    libs = [l for l in libs if "builtins" not in l]
    if libs:
        return libs[0]
    os.makedirs(CACHE, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", CACHE, "nvidia-cuda-nvrtc"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        sys.exit(f"nvrtc-check: error: cannot download nvidia-cuda-nvrtc with pip:\n{r.stderr}")
    for whl in glob.glob(os.path.join(CACHE, "nvidia_cuda_nvrtc-*.whl")):
        zipfile.ZipFile(whl).extractall(CACHE)
    libs = glob.glob(os.path.join(CACHE, "**", "libnvrtc.so.*"), recursive=True)
    libs = [l for l in libs if "builtins" not in l]
    if not libs:
        sys.exit("nvrtc-check: error: the nvidia-cuda-nvrtc wheel holds no libnvrtc.so")
    return libs[0]


def compile_for(nvrtc, src, arch):
    prog = ctypes.c_void_p()
    check = lambda rc, what: rc == 0 or sys.exit(f"nvrtc-check: error: {what} failed ({rc})")
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"psa_radix.cu", 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture=compute_{arch}".encode(), b"-std=c++17"]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    ptx_size = ctypes.c_size_t()
    if rc == 0:
        nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(ptx_size))
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, log.value.decode(errors="replace").strip(), ptx_size.value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", help="path of libnvrtc.so (default: from the PyPI wheel)")
    ap.add_argument("--arch", default="80,90", help="compute capabilities, comma-separated [80,90]")
    a = ap.parse_args()
    lib = a.lib or fetch_lib()
    try:
        nvrtc = ctypes.CDLL(lib)
    except OSError as e:
        print(f"nvrtc-check: error: cannot load {lib}: {e}", file=sys.stderr)
        sys.exit(2)
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    src = b"".join(open(os.path.join(ROOT, s), "rb").read() for s in SOURCES) + b"\0"
    failed = False
    for arch in a.arch.split(","):
        rc, log, ptx = compile_for(nvrtc, src, arch.strip())
        if rc != 0:
            failed = True
            print(f"nvrtc-check: compute_{arch}: FAILED (NVRTC {major.value}.{minor.value}):\n{log}", file=sys.stderr)
        else:
            note = f"; log:\n{log}" if log else ""
            print(f"nvrtc-check: compute_{arch}: ok, {ptx} bytes of PTX (NVRTC {major.value}.{minor.value}){note}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
