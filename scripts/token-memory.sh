#!/bin/bash
# Peak memory per token of psa dc3 on 4 M tokens at p = 2: bytes, u16 (Zipf over 50 k), u32 (Zipf over 2^20, 0xFFFFFFFF every 1000th).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
PSA=${PSA:-$(cd "$(dirname "$0")/.." && pwd)/target/ci/psa}
cd "${TOKDIR:-/tmp/tokmeas}"  # holds u8.bin, u16.bin, u32.bin (bench-results/2026-12-06-dev-tokens-memory.md)
for w in 1 2 4; do
  f=u$((8*w)).bin
  mpirun -n 2 --bind-to none $PSA --token-width $w --algo dc3 --base-case 100000 --threads 1 -o ./out$w.sa --stats ./stats$w.json $f "$@" 2>&1 | tail -1
  python3 - $w <<'PY'
import json,sys
w=sys.argv[1]; s=json.load(open(f'./stats{w}.json'))
n=s['n']; peaks=s['peak_rss_bytes_per_pe']; base=s['plan']['base_bytes']
blk=(n+1)//2
print(f"width {w}: n={n} time={s['total_secs']:.2f}s peak/pe={max(peaks)/2**20:.1f} MiB base={base/2**20:.1f} MiB -> (peak-base)/block = {(max(peaks)-base)/blk:.1f} B/token; planned {s['planned_peak_bytes']/2**20:.1f} MiB, measured/planned {s['measured_over_planned']:.2f}")
PY
done
