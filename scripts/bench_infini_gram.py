#!/usr/bin/env python3
"""The measuring, comparing and reporting of scripts/bench-infini-gram.sh (see its header).

    bench_infini_gram.py measure --runs JSONL --tool T --rep R --log FILE [--time-v FILE]
                                 [--pe-times FILE] -- COMMAND...
        runs COMMAND (output to FILE), samples the summed resident memory of its process tree
        every 50 ms, and appends one JSON line to JSONL: wall time, that sampled peak, the
        largest single process's peak from `/usr/bin/time -v`'s file, and with --pe-times the
        sum of the pes' peaks (lines `MAXRSS_KB ELAPSED_S` of `/usr/bin/time -f "%M %e"`).
    bench_infini_gram.py compare --tokens FILE --out JSON A B
        A and B (infini-gram tables of FILE's suffixes) byte for byte; where they differ, the
        first differing entries are judged by comparing the suffixes they name.
    bench_infini_gram.py report --runs JSONL --compare JSON --out MD [--meta KEY=VALUE]...
        the report (markdown).

Needs numpy for compare (the infini-gram venv has it); measure and report are stdlib only.
"""

import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root):
    """Resident bytes summed over root and its descendants (a scan of /proc)."""
    parent, rss = {}, {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{p}/statm", "rb") as f:
                resident = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        pid = int(p)
        parent[pid] = int(stat[stat.rindex(b")") + 2:].split()[1])
        rss[pid] = resident * PAGE
    children = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def time_v(path):
    """`/usr/bin/time -v`'s maximum resident set size (KiB) and elapsed seconds."""
    kb, wall = None, None
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("Maximum resident set size"):
                kb = int(line.rsplit(":", 1)[1])
            elif line.startswith("Elapsed (wall clock) time"):
                parts = line.rsplit(" ", 1)[1].split(":")
                wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(parts)))
    except OSError:
        pass
    return kb, wall


def measure(args):
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    with open(args.log, "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.05)
        wall = time.monotonic() - t0
    rec = {"tool": args.tool, "rep": args.rep, "rc": proc.returncode, "wall_s": round(wall, 3),
           "tree_peak_kb": peak // 1024}
    if args.time_v:
        rec["max_proc_kb"], rec["time_wall_s"] = time_v(args.time_v)
    if args.pe_times:
        pes = [line.split() for line in open(args.pe_times) if line.strip()]
        rec["pes"] = len(pes)
        rec["pes_sum_kb"] = sum(int(p[0]) for p in pes)
        rec["pes_max_kb"] = max((int(p[0]) for p in pes), default=0)
    with open(args.runs, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))
    return 0


def suffix_order(data, x, y):
    """(-1, 0 or 1 as the suffix at byte x is less, equal or greater than the one at y, and the
    length of their common prefix in bytes)."""
    import numpy as np
    lcp, step = 0, 4096
    while True:
        a, b = data[x + lcp:x + lcp + step], data[y + lcp:y + lcp + step]
        m = min(len(a), len(b))
        if a[:m] != b[:m]:
            d = np.frombuffer(a[:m], np.uint8) != np.frombuffer(b[:m], np.uint8)
            i = int(np.argmax(d))
            return (-1 if a[i] < b[i] else 1), lcp + i
        if len(a) != len(b) or m < step:
            return (len(a) > len(b)) - (len(a) < len(b)), lcp + m
        lcp += m
        step *= 2


def compare(args):
    import numpy as np
    a_path, b_path = args.tables
    sa, sb = os.path.getsize(a_path), os.path.getsize(b_path)
    ntok = os.path.getsize(args.tokens) // 2
    res = {"a": a_path, "b": b_path, "a_bytes": sa, "b_bytes": sb, "tokens": ntok}
    if sa != sb or ntok == 0 or sa % ntok:
        res.update(equal=False, note="sizes differ")
    else:
        w = sa // ntok
        a = np.fromfile(a_path, np.uint8).reshape(ntok, w)
        b = np.fromfile(b_path, np.uint8).reshape(ntok, w)
        diff = np.flatnonzero((a != b).any(axis=1))
        res.update(equal=len(diff) == 0, width=w, differing_entries=int(len(diff)))
        if len(diff):
            pw = 256 ** np.arange(w, dtype=np.uint64)
            ea = (a.astype(np.uint64) * pw).sum(axis=1)
            eb = (b.astype(np.uint64) * pw).sum(axis=1)
            del a, b
            res["first_differing_entry"] = int(diff[0])
            res["last_differing_entry"] = int(diff[-1])
            with open(args.tokens, "rb") as f:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                judged = []
                # Adjacent pairs around the first differing entries: in order by the bytes?
                for i in diff[:args.judge]:
                    i = int(i)
                    row = {"entry": i, "a": int(ea[i]), "b": int(eb[i])}
                    for name, e in (("a", ea), ("b", eb)):
                        bad = []
                        for j in (i - 1, i):
                            if 0 <= j and j + 1 < ntok:
                                c, lcp = suffix_order(data, int(e[j]), int(e[j + 1]))
                                if c >= 0:
                                    bad.append({"pair": [j, j + 1], "lcp_bytes": lcp})
                        row[name + "_out_of_order"] = bad
                    judged.append(row)
                res["judged"] = judged
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "judged"}))
    return 0


def fmt_s(s):
    return "–" if s is None else f"{s:.2f}"


def fmt_mb(kb):
    return "–" if kb is None else f"{kb / 1024:,.0f} MiB"


def report(args):
    meta = dict(m.split("=", 1) for m in args.meta)
    runs = [json.loads(line) for line in open(args.runs) if line.strip()]
    cmp_ = json.load(open(args.compare))
    tokens = int(meta["tokens"])
    by = {t: [r for r in runs if r["tool"] == t] for t in ("psa", "indexer")}
    med = {}
    for t, rs in by.items():
        ok = [r for r in rs if r["rc"] == 0]
        med[t] = {
            "n": len(ok), "of": len(rs),
            "wall": statistics.median(r["wall_s"] for r in ok) if ok else None,
            "tree": statistics.median(r["tree_peak_kb"] for r in ok) if ok else None,
            "proc": statistics.median(r["max_proc_kb"] for r in ok if r.get("max_proc_kb")) if ok else None,
            "pes": statistics.median(r["pes_sum_kb"] for r in ok) if ok and t == "psa" else None,
        }

    def bpt(kb):
        return "–" if kb is None else f"{kb * 1024 / tokens:.1f}"

    def ratio(x, y):
        return "–" if x is None or y is None or not y else f"{x / y:.2f}"

    p, ig = med["psa"], med["indexer"]
    if cmp_.get("equal"):
        verdict = (f"**equal**: psa's `table.0` and the indexer's are the same "
                   f"{cmp_['a_bytes']:,} bytes.")
    else:
        verdict = f"**different**: {cmp_.get('note', '')}"
        if "differing_entries" in cmp_:
            verdict += (f"{cmp_['differing_entries']:,} of {tokens:,} entries "
                        f"({cmp_['width']}-byte) differ, entries {cmp_['first_differing_entry']:,}"
                        f" … {cmp_['last_differing_entry']:,}.")
            lines = []
            for j in cmp_.get("judged", []):
                a_bad = "; ".join(f"{x['pair'][0]:,}/{x['pair'][1]:,} out of order "
                                  f"(common prefix {x['lcp_bytes']:,} bytes)"
                                  for x in j["a_out_of_order"]) or "in order"
                b_bad = "; ".join(f"{x['pair'][0]:,}/{x['pair'][1]:,} out of order "
                                  f"(common prefix {x['lcp_bytes']:,} bytes)"
                                  for x in j["b_out_of_order"]) or "in order"
                lines.append(f"- entry {j['entry']:,}: psa's suffix {j['a']:,}, with its "
                             f"neighbours {a_bad}; the indexer's suffix {j['b']:,}, {b_bad}")
            if lines:
                verdict += (" The first differing entries, each table's neighbouring suffixes "
                            "compared byte by byte:\n\n" + "\n".join(lines))
        if meta.get("psa_check"):
            verdict += f"\n\n`psa --check` on the same shard: {meta['psa_check']}"

    out = []
    out.append(f"# psa --infini-gram against infini-gram's own indexer — {meta['date']}, "
               f"{meta['label']}\n")
    out.append("Same-run benchmark (issue 65) by `scripts/bench-infini-gram.sh`: one u16 shard "
               "indexed by `psa --infini-gram` and by infini-gram's own indexer at the same core "
               "count, interleaved, the median of the runs reported.\n")
    out.append("## Setup\n")
    out.append(f"- Machine: {meta['label']} — {meta['nproc']} cores (`nproc`), "
               f"{meta['cpu']}, {meta['mem']} RAM; {meta['os']}.")
    out.append(f"- psa: commit `{meta['commit']}` (`{meta['psa']}`, Cargo profile `{meta.get('profile', 'ci')}`); "
               f"{meta['mpi']}.")
    out.append(f"- infini-gram {meta['ig_version']} from PyPI (its `rust_indexing` via "
               f"`python -m infini_gram.indexing`), Python {meta['python']}.")
    out.append(f"- Corpora: {meta['corpora']}.")
    out.append(f"- Tokenized by `scripts/tokenize-u16.py` (word-level, 65,534 most frequent "
               f"tokens + UNK, paragraphs as documents): **{tokens:,} tokens** "
               f"({int(meta['documents']):,} documents, separators included; "
               f"{int(meta['unk']):,} UNK), `tokenized.0` of {2 * tokens:,} bytes; "
               f"{meta['tokenize_s']} s to tokenize.")
    out.append(f"- {meta['reps']} repetitions each, interleaved (order alternating: "
               f"{meta['order']}); both read the shard from the page cache (it was just written).\n")
    out.append("Commands:\n")
    out.append("```")
    out.append(meta["psa_cmd"])
    out.append(meta["ig_cmd"])
    out.append("```\n")
    out.append("## Results\n")
    out.append("| | psa --infini-gram | infini-gram indexer | psa / indexer |")
    out.append("|---|---:|---:|---:|")
    out.append(f"| runs (succeeded / run) | {p['n']} / {p['of']} | {ig['n']} / {ig['of']} | |")
    out.append(f"| wall time, median (s) | {fmt_s(p['wall'])} | {fmt_s(ig['wall'])} | "
               f"{ratio(p['wall'], ig['wall'])} |")
    out.append(f"| peak memory, total over processes (sampled), median | {fmt_mb(p['tree'])} | "
               f"{fmt_mb(ig['tree'])} | {ratio(p['tree'], ig['tree'])} |")
    out.append(f"| … bytes per token | {bpt(p['tree'])} | {bpt(ig['tree'])} | |")
    out.append(f"| psa: sum of the pes' peaks (`/usr/bin/time` per pe), median | {fmt_mb(p['pes'])}"
               f" | | |")
    out.append(f"| … bytes per token | {bpt(p['pes'])} | | |")
    out.append(f"| largest single process's peak (`/usr/bin/time -v`), median | "
               f"{fmt_mb(p['proc'])} | {fmt_mb(ig['proc'])} | |\n")
    out.append(f"Byte for byte, the last runs' `table.0`: {verdict}\n")
    out.append("How it is measured: wall time is the whole command's (for psa `mpirun`'s, MPI's "
               "start-up and exit included; for the indexer Python's start-up included). "
               "\"Total over processes\" is the peak of the resident memory summed over the "
               "command's process tree (`mpirun` and the pes; the indexer's Python and its "
               "`rust_indexing` processes, of which make-part runs one per core at once), sampled "
               "every 50 ms from /proc: it counts pages shared by processes (the mapped shard) "
               "once per process, and can miss peaks shorter than 50 ms. For psa the sum of each "
               "pe's own peak (`mpirun … /usr/bin/time psa …`) bounds it from above, without "
               "`mpirun`. The indexer's `--mem` is the machine's RAM in GiB (it sets the number "
               "of make-part batches: one batch of `--cpus` parts here).\n")
    out.append("## Runs\n")
    out.append("| run | tool | exit | wall s | sampled tree peak | largest process | Σ pes' peaks |")
    out.append("|---:|---|---:|---:|---:|---:|---:|")
    for i, r in enumerate(runs, 1):
        out.append(f"| {i} | {r['tool']} (rep {r['rep']}) | {r['rc']} | {r['wall_s']} | "
                   f"{fmt_mb(r['tree_peak_kb'])} | {fmt_mb(r.get('max_proc_kb'))} | "
                   f"{fmt_mb(r.get('pes_sum_kb'))} |")
    if meta.get("notes"):
        out.append("\n## Notes\n")
        out.append(meta["notes"])
    text = "\n".join(out) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--runs", required=True)
    m.add_argument("--tool", required=True)
    m.add_argument("--rep", type=int, required=True)
    m.add_argument("--log", required=True)
    m.add_argument("--time-v")
    m.add_argument("--pe-times")
    m.add_argument("command", nargs=argparse.REMAINDER)
    c = sub.add_parser("compare")
    c.add_argument("--tokens", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--judge", type=int, default=3, help="differing entries to judge [3]")
    c.add_argument("tables", nargs=2)
    r = sub.add_parser("report")
    r.add_argument("--runs", required=True)
    r.add_argument("--compare", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--meta", action="append", default=[])
    args = ap.parse_args()
    return {"measure": measure, "compare": compare, "report": report}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
