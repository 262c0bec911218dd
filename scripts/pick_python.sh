#!/usr/bin/env sh
# Print the Python that `make demo` and `make test` build .venv with: the newest Python >= 3.12 this machine has
# (on PATH first, then in pyenv's versions directory), which takes the newest supported JAX (0.11 and later need
# Python >= 3.12); else python3, which then takes jax 0.10.x. Says on stderr which one and why.
newest=""
best=0
consider() {  # $1: a Python executable; keeps it when it runs and is newer than the best so far
    minor=$("$1" -c 'import sys; print(sys.version_info[1] if sys.version_info[0] == 3 else 0)' 2>/dev/null) || return 0
    case "$minor" in ''|*[!0-9]*) return 0 ;; esac
    if [ "$minor" -ge 12 ] && [ "$minor" -gt "$best" ]; then best=$minor; newest=$1; fi
}
for name in python3.14 python3.13 python3.12 python3; do
    path=$(command -v "$name" 2>/dev/null) && consider "$path"
done
where="PATH"
if [ -z "$newest" ]; then
    root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
    for path in "$root"/versions/3.1[2-9]*/bin/python3; do
        [ -x "$path" ] && consider "$path"
    done
    where="pyenv's versions directory"
fi
if [ -n "$newest" ]; then
    echo "jaxport: using Python 3.$best ($newest, from $where) with the newest supported JAX" >&2
    echo "$newest"
else
    echo "jaxport: no Python >= 3.12 on PATH or under pyenv; falling back to python3 ($(python3 --version 2>&1)), which installs jax 0.10.x (JAX 0.11 and later need Python >= 3.12)" >&2
    echo python3
fi
