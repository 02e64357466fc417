#!/usr/bin/env bash
# Creates benches/peers/.venv with the peers' dependencies from PyPI (idempotent: a venv that
# already has the pinned Bytewax is left as it is).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"
bytewax_version="0.21.1"

if [ -x "$venv/bin/python" ] &&
    "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('bytewax') != '$bytewax_version')" 2>/dev/null; then
    echo "setup.sh: $venv has bytewax $bytewax_version"
    exit 0
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "bytewax==$bytewax_version"
echo "setup.sh: $venv ready: $("$venv/bin/python" --version), bytewax $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("bytewax"))')"
