# Sourced by scripts/run and scripts/test: create .venv on first use and keep it in
# step with pyproject.toml (re-installs when pyproject.toml changes).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MAKAD_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "makad needs Python 3.11 or newer (found: $("$PY" --version 2>&1))" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.makad-installed"
WANT="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)-${MAKAD_EXTRAS:-dev}"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  # pip is quiet: without this line the first run looks stuck for a minute or two.
  if [ -f "$STAMP" ]; then
    echo "makad: updating $VENV to match pyproject.toml …" >&2
  else
    echo "makad: first use: installing makad and its dependencies into $VENV (a minute or two; needs PyPI) …" >&2
  fi
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2 || true
  if ! "$VENV/bin/python" -m pip install --quiet -e "$ROOT[${MAKAD_EXTRAS:-dev}]" >&2; then
    echo "makad: installing into $VENV failed (see above)" >&2
    exit 1
  fi
  echo "$WANT" > "$STAMP"
fi
