#!/usr/bin/env python3
"""Turns the runs of scripts/bench.sh into a CSV, a Markdown report and two SVG plots.

Standard library only (it also runs on the GPU host, which has no Python packages):

    python3 scripts/bench_report.py --runs RUNS.jsonl --out bench-results/NAME [--commit C] ...

RUNS.jsonl has one line per run as bench.sh records it (group, corpus, file, n, tool, algo, p,
threads, rep, status, rc, wall_secs, stats_file, log_file). stats_file is psa's --stats JSON or
sais-baseline's JSON line. The outputs are

  NAME-runs.jsonl   every run with its stats embedded (and the log tail of failed runs): the raw data
  NAME.csv          one row per configuration (medians over the runs)
  NAME.md           the tables: throughput and ratios to libsais, top-level phases (max/mean over
                    pes), memory and communication, worst cases, failures
  NAME-phases.svg   time per top-level phase for each psa configuration (max over pes)
  NAME-scaling.svg  MB/s over the process count, libsais 1 thread and all cores as lines

It can also re-render from a NAME-runs.jsonl alone (--runs NAME-runs.jsonl: stats are embedded).

Definitions used throughout:
  build s   psa: total_secs of --stats minus its level-0 phases read, write and check (so: the
            suffix array construction, like libsais' time); libsais: its construction time.
  MB/s      n / 10^6 / build s.
  × libsais psa's MB/s divided by libsais' MB/s on the same input (1T: one thread, NT: all
            cores); below 1 means psa is slower.
  wall s    the whole command (mpirun start-up, reading, writing the SA file included).
  recursion the level >= 1 phases of pDC3 summed (max over pes of each phase, then summed).
  refine rounds  pCSS's prefix-doubling rounds (refine_rounds of --stats).

The machine line comes from this host (lscpu, /proc/meminfo, nvidia-smi), or with --machine-env
from the environment.txt that scripts/device-bench.sh saved where the runs were made.
"""

import argparse
import csv
import datetime
import html
import json
import os
import platform
import statistics
import subprocess
import sys

IO_PHASES = ("read", "write", "check")


# ---------------------------------------------------------------------------------------------------
# loading


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if "stats" not in r:
                r["stats"] = read_stats(r.get("stats_file"))
            if r["status"] != "ok" and "log_tail" not in r:
                r["log_tail"] = tail(r.get("log_file"), 15)
            runs.append(r)
    return runs


def read_stats(path):
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            text = f.read().strip()
        if not text:
            return None
        # sais-baseline prints one JSON line; psa writes a JSON document.
        return json.loads(text.splitlines()[-1] if text.startswith('{"tool"') else text)
    except (OSError, ValueError):
        return None


def tail(path, n):
    if not path or not os.path.exists(path):
        return ""
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return ""
    # Drop Open MPI's boxed boilerplate ("---" ... "---") but keep what the program said.
    kept, inbox = [], False
    for line in lines:
        if line.startswith("-" * 20):
            inbox = not inbox
            continue
        if not inbox:
            kept.append(line)
    return "".join((kept or lines)[-n:])


# ---------------------------------------------------------------------------------------------------
# per-run figures


def build_secs(r):
    s = r.get("stats")
    if not s:
        return None
    if r["tool"] == "libsais":
        return s.get("secs")
    io = sum(ph["max_secs"] for ph in s.get("phases", []) if ph["level"] == 0 and ph["name"] in IO_PHASES)
    return max(s["total_secs"] - io, 1e-9)


def is_sub(name):
    """psa logs the steps of a sample sort ("· splitters", "· exchange", "· local sort") as phases
    of their own, nested in the phase that called the sort: they are not added to the totals."""
    return name.startswith("\u00b7") or name.startswith("·")


def sub_phases(s):
    """Sub-phases summed over all levels: {name: [sum of max, sum of mean]}."""
    out = {}
    for ph in s.get("phases", []):
        if is_sub(ph["name"]):
            m = out.setdefault(ph["name"].lstrip("· ").strip(), [0.0, 0.0])
            m[0] += ph["max_secs"]
            m[1] += ph["mean_secs"]
    return out


def top_phases(s):
    """Level-0 phases of a psa stats JSON (max, mean), plus 'recursion' (level >= 1 summed)."""
    out = {}
    rec_max = rec_mean = 0.0
    deeper = False
    for ph in s.get("phases", []):
        if is_sub(ph["name"]):
            continue  # inside its parent phase: counted there
        if ph["level"] == 0:
            m = out.setdefault(ph["name"], [0.0, 0.0])
            m[0] += ph["max_secs"]
            m[1] += ph["mean_secs"]
        else:
            deeper = True
            rec_max += ph["max_secs"]
            rec_mean += ph["mean_secs"]
    if deeper:
        out["recursion"] = [rec_max, rec_mean]
    return out


def phase_order(runs, algo=None):
    """Names of the top-level phases in execution order, merged over the runs (a phase that only
    some runs have goes right after the phase that precedes it in those runs)."""
    order = []
    for r in runs:
        s = r.get("stats")
        if r["tool"] != "psa" or not s or (algo is not None and r["algo"] != algo):
            continue
        names = [ph["name"] for ph in s.get("phases", []) if ph["level"] == 0 and not is_sub(ph["name"])]
        # "recursion" stands for the deeper levels: after the phase that starts them
        if any(ph["level"] > 0 and not is_sub(ph["name"]) for ph in s.get("phases", [])):
            at = names.index("build recursion") + 1 if "build recursion" in names else len(names)
            names.insert(at, "recursion")
        prev = None
        for name in names:
            if name not in order:
                order.insert(order.index(prev) + 1 if prev in order else 0 if prev is None else len(order), name)
            prev = name
    return order


# ---------------------------------------------------------------------------------------------------
# configurations


def config_key(r):
    return (r["group"], r["corpus"], r["tool"], r["algo"], int(r["p"]), int(r["threads"]))


def median_run(ok):
    """The run with the median build time (the lower middle one for an even count)."""
    ok = sorted(ok, key=build_secs)
    return ok[(len(ok) - 1) // 2]


def summarise(runs, cores):
    configs = {}
    for r in runs:
        configs.setdefault(config_key(r), []).append(r)
    rows = []
    for key, rs in configs.items():
        group, corpus, tool, algo, p, threads = key
        ok = [r for r in rs if r["status"] == "ok" and build_secs(r) is not None]
        bad = [r for r in rs if r["status"] != "ok"]
        row = {
            "group": group, "corpus": corpus, "n": int(rs[0]["n"]), "tool": tool, "algo": algo or "",
            "p": p, "threads": threads, "runs": len(rs), "runs_ok": len(ok),
            "status": bad[0]["status"] if bad else ("ok" if ok else "no-data"),
            "failed_runs": bad,
        }
        if ok:
            times = [build_secs(r) for r in ok]
            walls = [float(r["wall_secs"]) for r in ok]
            med = median_run(ok)
            s = med["stats"]
            row.update({
                "build_secs": statistics.median(times), "build_min": min(times), "build_max": max(times),
                "wall_secs": statistics.median(walls),
            })
            n = row["n"]
            row["mb_per_sec"] = n / 1e6 / row["build_secs"] if row["build_secs"] > 0 else 0.0
            row["e2e_mb_per_sec"] = n / 1e6 / row["wall_secs"] if row["wall_secs"] > 0 else 0.0
            if tool == "psa":
                peaks = s.get("peak_rss_bytes_per_pe", [])
                sent = s.get("bytes_sent_per_pe", [])
                row.update({
                    "peak_rss_max": max(peaks) if peaks else 0,
                    "peak_rss_per_pe": peaks,
                    "bytes_per_char": s.get("bytes_per_char", 0.0),
                    "bytes_sent_max": max(sent) if sent else 0,
                    "bytes_sent_total": sum(sent),
                    "bytes_sent_per_pe": sent,
                    "sent_per_char": sum(sent) / n if n else 0.0,
                    "imbalance": s.get("max_imbalance", 0.0),
                    "phases": top_phases(s),
                    "sub_phases": sub_phases(s),
                    "checked": s.get("checked", False),
                    "backend": s.get("backend", ""),
                    "refine_rounds": s.get("refine_rounds"),
                })
            else:
                row.update({
                    "peak_rss_max": s.get("peak_rss_bytes", 0),
                    "peak_rss_per_pe": [s.get("peak_rss_bytes", 0)],
                    "bytes_per_char": s.get("bytes_per_char", 0.0),
                    "bytes_sent_max": 0, "bytes_sent_total": 0, "bytes_sent_per_pe": [], "sent_per_char": 0.0,
                    "imbalance": 1.0, "phases": {}, "checked": False, "backend": "", "refine_rounds": None,
                })
        rows.append(row)

    # ratios to libsais on the same corpus
    base = {}
    for row in rows:
        if row["tool"] == "libsais" and row.get("mb_per_sec"):
            base[(row["corpus"], row["threads"])] = row["mb_per_sec"]
    for row in rows:
        b1 = base.get((row["corpus"], 1))
        bn = base.get((row["corpus"], cores))
        row["x_libsais_1t"] = row["mb_per_sec"] / b1 if row.get("mb_per_sec") and b1 else None
        row["x_libsais_nt"] = row["mb_per_sec"] / bn if row.get("mb_per_sec") and bn else None
        row["libsais_1t_mb_per_sec"] = b1
        row["libsais_nt_mb_per_sec"] = bn

    corpus_order = []
    for r in runs:
        if r["corpus"] not in corpus_order:
            corpus_order.append(r["corpus"])
    rows.sort(key=lambda x: (x["group"] != "real", corpus_order.index(x["corpus"]), x["tool"] != "libsais",
                             x["algo"], x["p"], x["threads"]))
    return rows


# ---------------------------------------------------------------------------------------------------
# formatting


def f(x, fmt="{:.2f}"):
    return "" if x is None else fmt.format(x)


def mb(x):
    return "" if x is None else f"{x / 1e6:.0f}"


def imb(row):
    # p = 1 has no sample sort to be imbalanced: psa reports 0 there.
    return f(row.get("imbalance"), "{:.2f}") if row["tool"] == "psa" and row["p"] > 1 else ""


def rounds(row):
    """pCSS's prefix-doubling refine rounds (0: none, e.g. when it recursed instead); blank for
    pDC3 and libsais."""
    if row["tool"] != "psa" or not row["algo"].startswith("css") or row.get("refine_rounds") is None:
        return ""
    return str(row["refine_rounds"])


def label(row):
    if row["tool"] == "libsais":
        return f"libsais {row['threads']}T"
    return f"psa {row['algo']} p={row['p']}×{row['threads']}T"


NOT_RUN = {"skipped-memory": "skipped: memory estimate above MemAvailable",
           "not-run-budget": "not run: time budget spent",
           "cut-by-budget": "cut: time budget ran out during the run"}


def is_failure(status):
    return status not in ("ok", "no-data") and status not in NOT_RUN


def status_cell(row):
    bad = [r["status"] for r in row["failed_runs"]]
    fails = [b for b in bad if is_failure(b)]
    if fails:
        return f"**FAIL: {fails[0]}**"
    if not bad:
        return "ok"
    if row["runs_ok"]:
        return f"ok ({len(bad)} run(s) {bad[0]})"
    return NOT_RUN.get(bad[0], bad[0])


def gpu_info():
    """'NAME (MEM MiB, driver D)' per GPU that nvidia-smi lists, joined; '' without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    gpus = []
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:
            gpus.append(f"{parts[0]} ({parts[1]}, driver {parts[2]})")
    return "; ".join(gpus)


def machine_from_env(path):
    """The machine as scripts/device-bench.sh's environment.txt describes it (date, uname -a,
    os-release, lscpu, free -g, nvidia-smi -L, mpirun --version, BUILD_INFO), for re-rendering a
    report somewhere else than where it ran."""
    info, m = {}, {"mem": "", "os": "", "mpi": "", "host": "", "gpu": ""}
    kernel = ""
    gpus = []
    with open(path, errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if line.startswith("Linux "):
                parts = line.split()
                m["host"], kernel = parts[1], parts[2]
            elif line.startswith("PRETTY_NAME="):
                m["os"] = line.split("=", 1)[1].strip().strip('"')
            elif line.startswith("Mem:"):
                m["mem"] = f"{line.split()[1]} GiB"
            elif line.startswith("GPU ") and ": " in line:
                gpus.append(line.split(": ", 1)[1].split(" (UUID")[0])
            elif line.startswith("mpirun ("):
                m["mpi"] = line
            elif ":" in line and not line.startswith(" "):
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    if kernel:
        m["os"] += f", kernel {kernel}"
    m["gpu"] = "; ".join(gpus)
    m.update({
        "model": info.get("Model name", "unknown"),
        "cpus": info.get("CPU(s)", "?"),
        "sockets": info.get("Socket(s)", "?"),
        "cores_per_socket": info.get("Core(s) per socket", "?"),
        "threads_per_core": info.get("Thread(s) per core", "?"),
        "hypervisor": info.get("Hypervisor vendor", ""),
    })
    return m


def machine_info():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    osname = platform.platform()
    try:
        with open("/etc/os-release") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    osname = line.split("=", 1)[1].strip().strip('"') + f", kernel {platform.release()}"
    except OSError:
        pass
    mpi = ""
    try:
        mpi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=20).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return {
        "model": info.get("Model name", platform.processor() or "unknown"),
        "cpus": info.get("CPU(s)", str(os.cpu_count())),
        "sockets": info.get("Socket(s)", "?"),
        "cores_per_socket": info.get("Core(s) per socket", "?"),
        "threads_per_core": info.get("Thread(s) per core", "?"),
        "hypervisor": info.get("Hypervisor vendor", ""),
        "mem": mem,
        "os": osname,
        "mpi": mpi,
        "host": platform.node(),
        "gpu": gpu_info(),
    }


def write_csv(rows, phases, path):
    cols = ["group", "corpus", "n", "tool", "algo", "p", "threads", "runs", "runs_ok", "status",
            "build_secs", "build_min", "build_max", "mb_per_sec", "x_libsais_1t", "x_libsais_nt",
            "wall_secs", "e2e_mb_per_sec", "peak_rss_max", "peak_rss_per_pe", "bytes_per_char",
            "bytes_sent_max", "bytes_sent_total", "bytes_sent_per_pe", "sent_per_char", "imbalance", "refine_rounds"]
    pcols = []
    for ph in phases:
        pcols += [f"phase_max:{ph}", f"phase_mean:{ph}"]
    subs = []
    for row in rows:
        for k in row.get("sub_phases", {}):
            if k not in subs:
                subs.append(k)
    for k in subs:
        pcols += [f"sample_sort_max:{k}", f"sample_sort_mean:{k}"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols + pcols)
        for row in rows:
            vals = []
            for c in cols:
                v = row.get(c)
                if isinstance(v, list):
                    v = " ".join(str(x) for x in v)
                elif isinstance(v, float):
                    v = f"{v:.6g}"
                vals.append("" if v is None else v)
            for ph in phases:
                m = row.get("phases", {}).get(ph)
                vals += [f"{m[0]:.6g}", f"{m[1]:.6g}"] if m else ["", ""]
            for k in subs:
                m = row.get("sub_phases", {}).get(k)
                vals += [f"{m[0]:.6g}", f"{m[1]:.6g}"] if m else ["", ""]
            w.writerow(vals)


def md_table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def write_md(rows, phases, args, path, base, runs_all):
    m = machine_from_env(args.machine_env) if args.machine_env else machine_info()
    real = [r for r in rows if r["group"] == "real"]
    worst = [r for r in rows if r["group"] == "worst"]
    L = []
    L.append(f"# psa benchmark — {os.path.basename(base)}")
    L.append("")
    L.append(f"- **Machine**: {m['model']}, {m['cpus']} CPUs ({m['sockets']} socket(s) × {m['cores_per_socket']} cores × "
             f"{m['threads_per_core']} threads){', ' + m['hypervisor'] + ' VM' if m['hypervisor'] else ''}, {m['mem']} RAM; "
             f"host `{m['host']}`" + (f"; GPU: {m['gpu']}" if m.get("gpu") else "; no GPU found"))
    L.append(f"- **OS / MPI**: {m['os']}; {m['mpi']}")
    L.append(f"- **Commit**: `{args.commit}` (psa and sais-baseline release builds of this commit"
             f"{'; +dirty: uncommitted changes under src/ at build time' if 'dirty' in args.commit else ''})")
    when = args.date or datetime.datetime.now().strftime('%Y-%m-%d %H:%M %Z').strip()
    L.append(f"- **Date**: {when}; whole benchmark took {args.elapsed} s")
    L.append(f"- **Command**: `{args.cmdline}`; psa under `{args.mpirun.strip()}`, `--threads` = cores / p "
             f"(cores = {args.cores}); `OMP_WAIT_POLICY=passive` for every run")
    L.append(f"- **Load average** (1/5/15 min) at start: {args.load_start}; at end: {args.load_end}")
    for note in args.note:
        L.append(f"- **Note**: {note}")
    L.append("")
    L.append("Times are medians over the runs of each configuration. *build s*: psa's `total_secs` minus its "
             "`read`/`write`/`check` phases, libsais' construction time — the same work for both. *MB/s* = n / 10⁶ / build s. "
             "*× libsais 1T / NT*: psa's MB/s divided by libsais' with one thread / all cores (below 1: psa is slower). "
             "*wall s*: the whole command including MPI start-up, reading the input and writing the SA. "
             "*refine rounds*: pCSS's prefix-doubling rounds (`refine_rounds` of --stats; 0 when it recursed instead). "
             "Every psa configuration's first run was compared byte for byte with libsais' SA unless the status says otherwise.")
    L.append("")

    def throughput(rs):
        lines = []
        for r in rs:
            lines.append([r["corpus"], f"{r['n'] / 1e6:.1f}", label(r), f(r.get("build_secs"), "{:.3f}"),
                          f(r.get("build_min"), "{:.3f}") + "–" + f(r.get("build_max"), "{:.3f}") if r.get("build_secs") else "",
                          f(r.get("mb_per_sec")), f(r.get("x_libsais_1t"), "{:.3f}"), f(r.get("x_libsais_nt"), "{:.3f}"),
                          f(r.get("wall_secs"), "{:.2f}"), f(r.get("bytes_per_char"), "{:.1f}"), rounds(r),
                          f"{r['runs_ok']}/{r['runs']}", status_cell(r)])
        return md_table(["corpus", "MB", "tool", "build s", "min–max", "MB/s", "× libsais 1T", "× libsais NT",
                         "wall s", "bytes/char", "refine rounds", "runs", "status"], lines)

    L.append("## Throughput")
    L.append("")
    L.append(throughput(real) if real else "(no runs)")
    L.append("")

    psa_rows = [r for r in rows if r["tool"] == "psa" and r.get("phases")]
    if psa_rows:
        L.append("## Top-level phases (seconds, max / mean over pes)")
        L.append("")
        L.append("Level-0 phases of the median run, one table per algorithm; *recursion* is every deeper level summed "
                 "(pDC3). The phases run one after the other, so max against mean shows each one's imbalance.")
        L.append("")
        for algo in sorted({r["algo"] for r in psa_rows}):
            ars = [r for r in psa_rows if r["algo"] == algo]
            aph = [p for p in phase_order(runs_all, algo) if any(p in r["phases"] for r in ars)]
            L.append(f"### {algo}")
            L.append("")
            lines = []
            for r in ars:
                ph = r["phases"]
                cells = [f"{ph[p][0]:.3f} / {ph[p][1]:.3f}" if p in ph else "" for p in aph]
                lines.append([r["corpus"], label(r)] + cells + [f(r.get("build_secs"), "{:.3f}")])
            L.append(md_table(["corpus", "config"] + aph + ["build s"], lines))
            L.append("")
        subs = [r for r in psa_rows if r.get("sub_phases")]
        if subs:
            names = []
            for r in subs:
                for k in r["sub_phases"]:
                    if k not in names:
                        names.append(k)
            L.append("### Inside the sample sorts (all levels)")
            L.append("")
            L.append("The steps of every distributed sample sort of the run, summed over all recursion levels "
                     "(max / mean over pes, seconds), and their share of build s (by max).")
            L.append("")
            lines = []
            for r in subs:
                sp = r["sub_phases"]
                tot = sum(v[0] for v in sp.values())
                lines.append([r["corpus"], label(r)] + [f"{sp[k][0]:.3f} / {sp[k][1]:.3f}" if k in sp else "" for k in names]
                             + [f"{tot:.3f}", f(tot / r["build_secs"] * 100 if r.get("build_secs") else None, "{:.0f} %")])
            L.append(md_table(["corpus", "config"] + names + ["sum", "of build"], lines))
            L.append("")
        L.append(f"![time per phase]({os.path.basename(base)}-phases.svg)")
        L.append("")
        L.append(f"![scaling]({os.path.basename(base)}-scaling.svg)")
        L.append("")

    mem_rows = [r for r in rows if r.get("build_secs") is not None]
    if mem_rows:
        L.append("## Memory and communication")
        L.append("")
        L.append("*peak RSS*: VmHWM of each process (for psa: each pe; the list is per pe). *bytes/char*: the peak RSS "
                 "summed over pes divided by n (libsais' floor is 5: text + 32-bit SA). *sent*: bytes each pe sent to others "
                 "during the whole run; *sent/char*: all pes together divided by n. *imbalance*: the fullest pe's share of "
                 "a sample sort's output relative to the mean (1.00 = perfect).")
        L.append("")
        lines = []
        for r in mem_rows:
            lines.append([r["corpus"], label(r), mb(r["peak_rss_max"]),
                          " ".join(f"{x / 1e6:.0f}" for x in r["peak_rss_per_pe"]), f(r.get("bytes_per_char"), "{:.1f}"),
                          mb(r["bytes_sent_max"]) if r["tool"] == "psa" else "",
                          mb(r["bytes_sent_total"]) if r["tool"] == "psa" else "",
                          f(r.get("sent_per_char"), "{:.1f}") if r["tool"] == "psa" else "",
                          imb(r)])
        L.append(md_table(["corpus", "config", "peak RSS max MB", "peak RSS per pe MB", "bytes/char", "sent max MB/pe",
                           "sent total MB", "sent/char", "imbalance"], lines))
        L.append("")

    if worst:
        L.append("## Worst cases")
        L.append("")
        L.append("aⁿ, the Fibonacci word, one 64 KiB random block repeated, and random bytes of the same size "
                 "(scripts/synthetic.py). *vs random*: build time on the input divided by build time on random text "
                 "with the same configuration (how much harder the input is).")
        L.append("")
        rand = {}
        for r in worst:
            if r["corpus"].startswith("random-") and r.get("build_secs"):
                rand[(r["tool"], r["algo"], r["p"], r["threads"])] = r["build_secs"]
        lines = []
        for r in worst:
            rb = rand.get((r["tool"], r["algo"], r["p"], r["threads"]))
            vs = r["build_secs"] / rb if rb and r.get("build_secs") else None
            lines.append([r["corpus"], label(r), f(r.get("build_secs"), "{:.3f}"), f(r.get("mb_per_sec")),
                          f(vs, "{:.2f}×"), f(r.get("x_libsais_1t"), "{:.3f}"), f(r.get("x_libsais_nt"), "{:.3f}"),
                          f(r.get("bytes_per_char"), "{:.1f}"), rounds(r), imb(r), status_cell(r)])
        L.append(md_table(["input", "config", "build s", "MB/s", "vs random", "× libsais 1T", "× libsais NT", "bytes/char",
                           "refine rounds", "imbalance", "status"], lines))
        L.append("")

    failed = [r for r in rows if any(is_failure(fr["status"]) for fr in r["failed_runs"])]
    notrun = [r for r in rows if r not in failed and r["failed_runs"]]
    L.append("## Failures")
    L.append("")
    if not failed:
        L.append("None: every run that was started exited 0, and every compared SA equalled libsais'.")
    else:
        for r in failed:
            frs = [fr for fr in r["failed_runs"] if is_failure(fr["status"])]
            L.append(f"- **{r['corpus']} {label(r)}: {frs[0]['status']}** (exit code {frs[0].get('rc')}, "
                     f"run {frs[0].get('rep')}; the remaining runs of this configuration were not started)")
            for fr in frs[:1]:
                if fr.get("log_tail"):
                    L.append("")
                    L.append("  ```")
                    L.extend("  " + x for x in fr["log_tail"].rstrip().splitlines())
                    L.append("  ```")
    if notrun:
        L.append("")
        L.append("Not run (not failures):")
        L.append("")
        for r in notrun:
            L.append(f"- {r['corpus']} {label(r)}: {len(r['failed_runs'])} run(s) "
                     f"{NOT_RUN.get(r['failed_runs'][0]['status'], r['failed_runs'][0]['status'])}")
    L.append("")
    L.append(f"Raw data: `{os.path.basename(base)}-runs.jsonl` (every run with psa's full --stats JSON), "
             f"`{os.path.basename(base)}.csv` (the medians).")
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")


# ---------------------------------------------------------------------------------------------------
# SVG (hand-written: no plotting library needed)

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#17becf", "#bcbd22", "#8c564b", "#7f7f7f"]


def distinct_colour(i, n):
    """n colours that stay apart: hues spread around the circle, alternating lightness."""
    import colorsys
    if i < len(PALETTE) and n <= len(PALETTE):
        return PALETTE[i]
    h = (i * 0.618033988749895) % 1.0
    l = 0.45 if i % 2 == 0 else 0.68
    r, g, b = colorsys.hls_to_rgb(h, l, 0.65)
    return "#%02x%02x%02x" % (int(r * 255), int(g * 255), int(b * 255))


def esc(s):
    return html.escape(str(s), quote=True)


def svg_phases(rows, phases, path):
    bars = [r for r in rows if r["tool"] == "psa" and r.get("phases") and r["group"] == "real"]
    if not bars:
        return False
    shown = list(phases) + ["other"]
    colour = {p: distinct_colour(i, len(shown)) for i, p in enumerate(shown)}
    colour["other"] = "#dddddd"
    segs = []
    for r in bars:
        ph = r["phases"]
        s = [(p, ph[p][0]) for p in phases if p in ph]
        total = (r["build_secs"] or 0) + sum(ph[p][0] for p in IO_PHASES if p in ph)
        rest = total - sum(v for _, v in s)
        if rest > 1e-3:
            s.append(("other", rest))
        segs.append(s)
    tmax = max(sum(v for _, v in s) for s in segs) or 1.0
    left, right, top, bh, gap = 300, 40, 40 + 18 * ((len(shown) + 3) // 4), 20, 6
    width = 1000
    plot_w = width - left - right
    height = top + len(bars) * (bh + gap) + 50
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="15">psa: time per top-level phase (max over pes), median run</text>']
    for i, p in enumerate(shown):
        x, y = 20 + (i % 4) * 240, 32 + (i // 4) * 18
        o.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{colour[p]}"/>'
                 f'<text x="{x + 16}" y="{y + 10}">{esc(p)}</text>')
    step = nice_step(tmax / 6)
    t = 0.0
    while t <= tmax * 1.0001:
        x = left + plot_w * t / tmax
        o.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 40}" stroke="#eee"/>'
                 f'<text x="{x:.1f}" y="{height - 26}" text-anchor="middle">{t:g}</text>')
        t += step
    o.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">seconds</text>')
    for k, (r, s) in enumerate(zip(bars, segs)):
        y = top + k * (bh + gap)
        o.append(f'<text x="{left - 6}" y="{y + bh - 6}" text-anchor="end">{esc(r["corpus"] + "  " + label(r))}</text>')
        x = left
        for p, v in s:
            w = plot_w * v / tmax
            o.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0):.1f}" height="{bh}" fill="{colour[p]}">'
                     f'<title>{esc(p)}: {v:.3f} s</title></rect>')
            x += w
        o.append(f'<text x="{x + 4:.1f}" y="{y + bh - 6}">{sum(v for _, v in s):.2f} s</text>')
    o.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(o) + "\n")
    return True


def nice_step(x):
    if x <= 0:
        return 1.0
    import math
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e


def svg_scaling(rows, path):
    import math
    real = [r for r in rows if r["group"] == "real"]
    corpora = []
    for r in real:
        if r["corpus"] not in corpora:
            corpora.append(r["corpus"])
    if not corpora:
        return False
    pw, ph, pad = 420, 300, 60
    width = max(len(corpora) * (pw + pad) + pad, 760)
    height = ph + 140
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="15">Scaling: MB/s (build) over processes p '
         f'(threads = cores / p); dashed: libsais</text>']
    for ci, c in enumerate(corpora):
        x0, y0 = pad + ci * (pw + pad), 50
        rs = [r for r in real if r["corpus"] == c and r.get("mb_per_sec")]
        psa = [r for r in rs if r["tool"] == "psa"]
        libs = [r for r in rs if r["tool"] == "libsais"]
        ps = sorted({r["p"] for r in psa}) or [1]
        ymax = max([r["mb_per_sec"] for r in rs] + [1e-3]) * 1.15
        xs = {p: x0 + (pw * (math.log2(p) - math.log2(ps[0])) / max(math.log2(ps[-1]) - math.log2(ps[0]), 1)) for p in ps}
        o.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        o.append(f'<text x="{x0 + pw / 2}" y="{y0 - 8}" text-anchor="middle" font-size="14">{esc(c)}</text>')
        step = nice_step(ymax / 5)
        t = 0.0
        while t <= ymax:
            y = y0 + ph - ph * t / ymax
            o.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
            t += step
        for p in ps:
            o.append(f'<text x="{xs[p]:.1f}" y="{y0 + ph + 16}" text-anchor="middle">{p}</text>')
        o.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 34}" text-anchor="middle">p (processes)</text>')
        o.append(f'<text x="{x0 - 40}" y="{y0 + ph / 2}" text-anchor="middle" transform="rotate(-90 {x0 - 40} {y0 + ph / 2})">MB/s</text>')
        k = 0
        legend = []
        for lr in libs:
            y = y0 + ph - ph * lr["mb_per_sec"] / ymax
            col = "#555" if lr["threads"] == 1 else "#000"
            # 1 thread labelled on the left, all cores on the right, so close lines stay readable
            lx, anchor = (x0 + 4, "start") if lr["threads"] == 1 else (x0 + pw - 4, "end")
            o.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="{col}" stroke-dasharray="6,4"/>'
                     f'<text x="{lx}" y="{y - 4:.1f}" text-anchor="{anchor}" fill="{col}">libsais {lr["threads"]}T '
                     f'{lr["mb_per_sec"]:.1f}</text>')
        for algo in sorted({r["algo"] for r in psa}):
            col = PALETTE[k % len(PALETTE)]
            k += 1
            pts = sorted((r["p"], r["mb_per_sec"]) for r in psa if r["algo"] == algo)
            path_d = " ".join(f"{xs[p]:.1f},{y0 + ph - ph * v / ymax:.1f}" for p, v in pts)
            o.append(f'<polyline points="{path_d}" fill="none" stroke="{col}" stroke-width="2"/>')
            for p, v in pts:
                o.append(f'<circle cx="{xs[p]:.1f}" cy="{y0 + ph - ph * v / ymax:.1f}" r="4" fill="{col}">'
                         f'<title>{algo} p={p}: {v:.2f} MB/s</title></circle>')
            legend.append((algo, col))
        for i, (algo, col) in enumerate(legend):
            o.append(f'<rect x="{x0 + 10 + i * 90}" y="{y0 + ph + 50}" width="12" height="12" fill="{col}"/>'
                     f'<text x="{x0 + 26 + i * 90}" y="{y0 + ph + 60}">psa {esc(algo)}</text>')
    o.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(o) + "\n")
    return True


# ---------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True, help="base path: writes BASE.csv, BASE.md, BASE-runs.jsonl, BASE-*.svg")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--cmdline", default="")
    ap.add_argument("--load-start", default="?")
    ap.add_argument("--load-end", default="?")
    ap.add_argument("--elapsed", default="?")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--note", action="append", default=[])
    ap.add_argument("--date", default="", help="when the runs were made [now]")
    ap.add_argument("--machine-env", default="", help="take the machine from this environment.txt of "
                    "scripts/device-bench.sh (when re-rendering elsewhere) [this machine]")
    args = ap.parse_args()

    runs = load_runs(args.runs)
    if not runs:
        print("bench_report.py: no runs recorded", file=sys.stderr)
        return 1
    base = args.out
    raw = base + "-runs.jsonl"
    if os.path.abspath(raw) != os.path.abspath(args.runs):
        with open(raw, "w") as fh:
            for r in runs:
                fh.write(json.dumps(r) + "\n")
    rows = summarise(runs, args.cores)
    phases = phase_order(runs)
    write_csv(rows, phases, base + ".csv")
    svg_phases(rows, phases, base + "-phases.svg")
    svg_scaling(rows, base + "-scaling.svg")
    write_md(rows, phases, args, base + ".md", base, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
