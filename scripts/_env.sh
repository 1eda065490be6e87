# Sourced by scripts/test and scripts/example: make sure a virtual environment
# with cpasim and its extras exists (created on first use, refreshed when
# pyproject.toml changes) and put it first on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CPASIM_VENV:-$root/.venv}"
stamp="$venv/.cpasim-installed"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ]; then
    echo "cpasim: creating a virtual environment in $venv (first run only)" >&2
    python3 -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "cpasim: installing cpasim and its dependencies into $venv" >&2
    log="$venv/install.log"
    if ! { "$venv/bin/python" -m pip install --upgrade pip &&
           "$venv/bin/python" -m pip install -e "$root[test,dask,table]"; } >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "cpasim: installation failed; the whole log is in $log" >&2
        exit 1
    fi
    echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
cd "$root"
