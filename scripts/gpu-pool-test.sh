#!/usr/bin/env bash
# scripts/gpu-pool-test.sh — `psa --gpu` at p > 1 (the text streamed through pe 0 to its device,
# src/algo/offload/relay.rs) against libsais on the hard inputs, for the GPU host (needs python3, mpirun
# and the two binaries; builds nothing).
#
#   scripts/gpu-pool-test.sh [--psa BIN] [--baseline BIN] [--procs "2 3 4 5 7"]
#
# For every input (random bytes, aⁿ, 0x00/0xFF, Fibonacci, periodic, repeated 64 KiB blocks, DNA
# with N runs, words) at 2^18 + 13 and 2.5·10^6 characters, and for every P: `psa --gpu` under
# `mpirun -n P` (css; dc3 at one P) must write libsais' SA byte for byte, and its --stats must show
# that the device built it (no distributed phase at level 0). Then the cases that must not take the
# device path and still be right: a text below the device minimum (10^5) and --no-gpu-pool; and with
# --no-gpu-pool and a small --base-case, a pDC3 recursion level relayed to the device (names).
# Prints one line per run and `gpu-pool-test: N passed, M failed`; exit 1 on any failure. Without a
# GPU every --gpu run fails with a clear error, so this script fails too (it never passes silently).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PSA=$HERE/../target/release/psa
BASE=$HERE/../target/release/examples/sais-baseline
PROCS="2 3 4 5 7"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --psa) PSA=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --procs) PROCS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gpu-pool-test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0
fail=0

make_text() { # kind size out
  python3 - "$@" <<'EOF'
import random, sys
kind, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = random.Random(kind + str(n))
if kind == "random":
    t = r.randbytes(n)
elif kind == "an":
    t = b"a" * n
elif kind == "zeroff":
    t = bytes(r.choice((0, 0, 0, 255)) for _ in range(n))
elif kind == "fib":
    a, b = b"a", b"ab"
    while len(b) < n:
        a, b = b, b + a
    t = b[:n]
elif kind == "periodic":
    unit = r.randbytes(37)
    t = (unit * (n // 37 + 1))[:n]
elif kind == "repblock":
    unit = r.randbytes(65536)
    t = (unit * (n // 65536 + 1))[:n]
elif kind == "dna":
    t = bytearray(r.choice(b"ACGT") for _ in range(n))
    for _ in range(20):
        s = r.randrange(n)
        t[s:s + 5000] = b"N" * len(t[s:s + 5000])
    t = bytes(t)
elif kind == "words":
    words = [bytes(r.choice(b"abcdefghij") for _ in range(r.randint(1, 8))) for _ in range(300)]
    parts, size = [], 0
    while size < n:
        w = r.choice(words) + b" "
        parts.append(w)
        size += len(w)
    t = b"".join(parts)[:n]
open(out, "wb").write(t)
EOF
}

# level_built STATS: whether a recursion level (level >= 1) was built on the device through the relay
# (a "device suffix array" phase below the top level, and nothing deeper than it).
level_built() {
  python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
dev = [p["level"] for p in d["phases"] if p["level"] >= 1 and p["name"] == "device suffix array"]
deepest = max((p["level"] for p in d["phases"]), default=0)
sys.exit(0 if dev and deepest == max(dev) else 1)
EOF
}

# device_built STATS: whether the run's level-0 phases are only the device's (and I/O).
device_built() {
  python3 - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
names = {p["name"] for p in d["phases"] if p["level"] == 0}
sys.exit(0 if "device suffix array" in names and names <= {"read", "device suffix array", "write", "check"} else 1)
EOF
}

# one LABEL P WANT_DEVICE(yes/no/level) ARGS...
one() {
  local label=$1 p=$2 want=$3; shift 3
  local status=ok
  if ! mpirun -n "$p" "$PSA" --gpu -q --stats "$W/s.json" -o "$W/out.sa" "$@" \
      "$W/in.txt" >"$W/log" 2>&1; then
    status="failed: $(tail -3 "$W/log" | tr '\n' ' ')"
  elif ! cmp -s "$W/out.sa" "$W/ref.sa"; then
    status="differs from libsais"
  elif [[ $want == yes ]] && ! device_built "$W/s.json"; then
    status="right, but not built on the device"
  elif [[ $want == no || $want == level ]] && device_built "$W/s.json"; then
    status="built on the device, which it must not be here"
  elif [[ $want == level ]] && ! level_built "$W/s.json"; then
    status="right, but no recursion level was built on the device"
  fi
  if [[ $status == ok ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
  echo "RUN $label p=$p $* status=$status"
}

reference() {
  "$BASE" --threads "$(nproc)" -o "$W/ref.sa" "$W/in.txt" >/dev/null
}

for n in $(( (1 << 18) + 13 )) 2500001; do
  for kind in random an zeroff fib periodic repblock dna words; do
    make_text "$kind" "$n" "$W/in.txt"
    reference
    for p in $PROCS; do
      one "$kind n=$n" "$p" yes
    done
    one "$kind n=$n" 3 yes --algo dc3
  done
done
make_text dna 100000 "$W/in.txt"
reference
one "dna n=100000 (below the device minimum)" 3 no
make_text fib 2500001 "$W/in.txt"
reference
one "fib n=2500001 --no-gpu-pool" 3 no --no-gpu-pool
one "fib n=2500001 --no-gpu-pool" 4 no --no-gpu-pool --algo dc3
# A recursion level relayed to the device (integer names): the top level is distributed
# (--no-gpu-pool) and larger than the base case, its first recursion level fits the device.
for kind in fib repblock an dna; do
  make_text "$kind" 2500001 "$W/in.txt"
  reference
  for p in 2 3 5; do
    one "$kind n=2500001 --no-gpu-pool level relay" "$p" level --no-gpu-pool --algo dc3 --base-case 300000
  done
done

echo "gpu-pool-test: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
