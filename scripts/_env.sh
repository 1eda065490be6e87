# Sourced by scripts/test and scripts/example: make sure a virtual environment
# with cpasim and its extras exists (created on first use, refreshed when
# pyproject.toml changes), that the analyzer is compiled, and put it first on PATH.
# The first run takes a few minutes; it says what it is doing as it goes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CPASIM_VENV:-$root/.venv}"
stamp="$venv/.cpasim-installed"
compiled="$venv/.cpasim-compiled"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
# numba's cache is keyed on the kernel's sources, every module's name and text
# (cpasim/analysis/numba_cache.py): recompile when one changes, or one is added.
want_kernel="$(cd "$root/cpasim/analysis/kernel" && sha256sum -- *.py | sha256sum | cut -d' ' -f1)"

say() { echo "cpasim: $*" >&2; }

# Runs "$@" with its output in $log; shows pip's Collecting/Installing lines with
# the seconds elapsed so far (the rest stays in the log), and a line every 8 s
# while pip is quiet (unpacking numpy, scipy, numba ... takes a minute or two), so
# that a log of the set-up is never silent for 10 s.
install_step() {
    { PYTHONUNBUFFERED=1 "$@" 2>&1 || echo "cpasim-step-failed"; } | tee -a "$log" |
        while :; do
            if IFS= read -r -t 8 line; then
                case "$line" in
                    Collecting* | Installing* | Successfully* | Building*)
                        printf '  [%4ds] %s\n' "$((SECONDS - t0))" "$line" >&2 ;;
                    cpasim-step-failed) exit 1 ;;
                esac
            elif [ $? -gt 128 ]; then
                printf '  [%4ds] ... still working\n' "$((SECONDS - t0))" >&2
            else
                break
            fi
        done
}

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    t0=$SECONDS
    mkdir -p "$venv"
    log="$venv/install.log"
    : >"$log"
    if [ ! -x "$venv/bin/python" ]; then
        say "first run: setting up $venv (about 3-5 minutes: installing the dependencies,"
        say "then compiling the analyzer once; later runs start at once)"
        if ! install_step python3 -m venv "$venv"; then
            tail -n 20 "$log" >&2
            say "creating the virtual environment failed; its output is in $log"
            exit 1
        fi
    else
        say "pyproject.toml changed: updating $venv (a minute or two)"
    fi
    say "installing cpasim and its dependencies (numpy, scipy, numba, matplotlib, dask, pandas ...)"
    if ! { install_step "$venv/bin/python" -m pip install --progress-bar off --upgrade pip &&
           install_step "$venv/bin/python" -m pip install --progress-bar off \
               -e "$root[test,dask,table]"; }; then
        tail -n 20 "$log" >&2
        say "installation failed; the whole log is in $log"
        exit 1
    fi
    say "installed in $((SECONDS - t0)) s (pip's whole output: $log)"
    echo "$want" >"$stamp"
fi
if [ "$(cat "$compiled" 2>/dev/null)" != "$want_kernel" ]; then
    t0=$SECONDS
    say "compiling the critical-path analyzer (numba, once; about 1-2 minutes) ..."
    if ! "$venv/bin/python" -m cpasim.analysis.compiled; then
        say "compiling the analyzer failed; cpasim analyze will try again when first used"
    else
        say "analyzer compiled in $((SECONDS - t0)) s (cached beside cpasim/analysis/kernel/)"
        echo "$want_kernel" >"$compiled"
    fi
fi
export PATH="$venv/bin:$PATH"
# Python's compiled bytecode (and pytest's rewritten test modules) is kept in the
# virtual environment, not beside the sources, even where PYTHONDONTWRITEBYTECODE
# asks not to litter them: without a cache every test run compiles cpasim and the
# tests again (4 of the quick suite's seconds), and every command a test runs does.
export PYTHONPYCACHEPREFIX="$venv/pycache"
unset PYTHONDONTWRITEBYTECODE
cd "$root"
