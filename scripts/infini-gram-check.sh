#!/usr/bin/env bash
# psa's infini-gram tables read by infini-gram itself: installs PyPI's infini-gram (2.6.0: its
# engine and its indexer, which need Python 3.11 or later) and numpy into a venv under target/,
# then runs scripts/infini_gram_check.py (its engine's counts and finds on psa's tables against
# naive ones, and its indexer's tables against psa's, byte for byte). Under a minute.
#
#   bash scripts/infini-gram-check.sh [PSA [--hack-demo]]   PSA: the binary [default: target/ci/psa]
#
# --hack-demo also shows where infini-gram's indexer in parts is not exact (a repeat longer than
# its HACK window of 100000 bytes across a part's end), against psa's exact table.
#
# Where pip cannot install the package (no route to PyPI) it says so and exits 0 — except in CI
# (CI=true, as .ci/run runs it) or with PSA_IG_REQUIRE=1, where that is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

psa=${1:-target/ci/psa}
shift || true
venv=target/infini-gram-venv
scratch=target/infini-gram-check
required=false
if [ "${CI:-}" = true ] || [ "${PSA_IG_REQUIRE:-}" = 1 ]; then
    required=true
fi

skip() {
    if [ "$required" = true ]; then
        echo "infini-gram check: FAILED: $*" >&2
        exit 1
    fi
    echo "infini-gram check: skipped: $*"
    exit 0
}

if [ ! -x "$psa" ]; then
    echo "infini-gram check: no psa binary at '$psa' (build it: cargo build --profile ci)" >&2
    exit 1
fi
if ! "$venv/bin/python" -c 'import infini_gram.engine, numpy' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" || skip "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'infini-gram==2.6.0' numpy ||
        skip "pip could not install infini-gram 2.6.0 and numpy from PyPI (see pip's words above)"
fi
exec "$venv/bin/python" scripts/infini_gram_check.py --psa "$psa" --scratch "$scratch" "$@"
