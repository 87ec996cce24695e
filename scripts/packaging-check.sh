#!/usr/bin/env bash
# Checks the recipes in packaging/ (Spack, bioconda, Apptainer) against the built psa without
# building them: scripts/packaging_check.py says what it checks. A few seconds; CI runs it.
#
#   bash scripts/packaging-check.sh [PSA_BINARY]    # default: target/ci/psa (built if missing)
#
# Needs python3 (3.11+) with PyYAML: if it is missing, PyYAML is installed from PyPI into a
# temporary directory (pip), or as Debian's python3-yaml when run as root without pip.
set -euo pipefail

cd "$(dirname "$0")/.."
psa=${1:-target/ci/psa}
if [[ ! -x $psa ]]; then
    echo "packaging-check: building $psa"
    cargo build --profile ci --bin psa
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! python3 -c 'import yaml' 2>/dev/null; then
    if python3 -m pip --version >/dev/null 2>&1; then
        python3 -m pip install --quiet --target "$work/py" pyyaml
        export PYTHONPATH="$work/py${PYTHONPATH:+:$PYTHONPATH}"
    elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y python3-yaml
    else
        echo "packaging-check: error: python3 lacks PyYAML and pip: install python3-yaml" >&2
        exit 1
    fi
fi
python3 scripts/packaging_check.py "$psa"
