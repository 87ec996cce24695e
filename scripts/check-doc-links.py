#!/usr/bin/env python3
"""Checks the relative links of the project's Markdown documents.

Every link `[text](target)` of README.md, docs/*.md, bench-results/README.md and
packaging/README.md (or of the files given) whose target is not a URL must name an existing file
or directory, relative to the document; a `#fragment` must name a heading of the target (GitHub's
anchors: lower case, punctuation dropped, spaces to hyphens). Prints each broken link and exits
1 if there is one.

    python3 scripts/check-doc-links.py [FILE.md...]
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["README.md", "docs/*.md", "bench-results/README.md", "packaging/README.md"]
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def anchors(path):
    """GitHub's heading anchors of a Markdown file."""
    seen = {}
    out = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        title = re.sub(r"`", "", title)
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    """(line number, target) of every link outside code blocks and code spans."""
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for m in LINK.finditer(line):
            yield number, m.group(1)


def main(argv):
    files = []
    for pattern in argv or DEFAULT:
        files.extend(sorted(ROOT.glob(pattern)) or [ROOT / pattern])
    broken = 0
    checked = 0
    for doc in files:
        if not doc.is_file():
            print(f"{doc}: no such document")
            broken += 1
            continue
        for number, target in links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL (https:, mailto:)
            checked += 1
            name, _, fragment = target.partition("#")
            dest = (doc.parent / name).resolve() if name else doc
            where = f"{doc.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                print(f"{where}: no such file")
                broken += 1
            elif fragment and dest.is_file() and dest.suffix == ".md":
                if fragment not in anchors(dest):
                    print(f"{where}: no heading #{fragment}")
                    broken += 1
    print(f"{checked} relative links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
