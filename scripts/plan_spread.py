#!/usr/bin/env python3
"""The spread of the memory plan against measured peaks, from scripts/plan-calibration.sh tables.

    python3 scripts/plan_spread.py TABLE.md...

Prints one row per plan: how many runs, the lowest planned/measured ratio and its input (below 1
the plan was exceeded), the highest and its input, and how many runs fall within 1.2.
"""
import collections
import sys


def rows(paths):
    for path in paths:
        for line in open(path):
            if not line.startswith("| ") or line.startswith("| input"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            yield cells[0], int(cells[1]), cells[2], float(cells[5])


def main():
    by = collections.defaultdict(list)
    for name, p, plan, ratio in rows(sys.argv[1:]):
        by[plan].append((ratio, f"{name} p={p}"))
    print("| plan | runs | lowest planned/measured | highest | within 1.2 |")
    print("|---|---|---|---|---|")
    every = []
    for plan, v in by.items():
        v.sort()
        every += [r for r, _ in v]
        near = sum(1 for r, _ in v if 1.0 <= r <= 1.2)
        print(f"| {plan} | {len(v)} | {v[0][0]:.2f} ({v[0][1]}) | {v[-1][0]:.2f} ({v[-1][1]}) | {near} |")
    if every:
        below = sum(1 for r in every if r < 1.0)
        near = sum(1 for r in every if 1.0 <= r <= 1.2)
        print(f"\nall {len(every)} runs: planned/measured {min(every):.2f}–{max(every):.2f}; "
              f"{below} below 1 (the plan exceeded), {near} within 1.0–1.2")


if __name__ == "__main__":
    main()
