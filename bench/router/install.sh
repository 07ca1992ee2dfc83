#!/usr/bin/env bash
# Install SGLang's router (PyPI `sglang-router`, a Rust binary behind a Python CLI) into its own
# virtual environment:
#   bench/router/install.sh VENV
# It creates VENV, installs the pinned version, checks that `python -m sglang_router.launch_router
# --help` runs, and touches VENV/READY. Exit codes: 0 installed, 1 could not install.
set -euo pipefail
VENV=${1:?usage: install.sh VENV}
ROUTER_PACKAGE=${PCACHE_ROUTER_PACKAGE:-sglang-router==0.3.2}
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

fail() {
    echo "install.sh: $*" >&2
    exit 1
}

pip_log=$(mktemp)
trap 'rm -f "$pip_log"' EXIT
rm -f "$VENV/READY"
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV" || fail "cannot create a venv at $VENV"
"$VENV/bin/python" -m pip install -q "$ROUTER_PACKAGE" 2>"$pip_log" \
    || fail "cannot install $ROUTER_PACKAGE: $(grep -E '^(ERROR|error):' "$pip_log" | tail -n 1)"
"$VENV/bin/python" -m sglang_router.launch_router --help >/dev/null \
    || fail "the router does not start: $VENV/bin/python -m sglang_router.launch_router --help"
touch "$VENV/READY"
echo "install.sh: $ROUTER_PACKAGE installed in $VENV ($(du -sh "$VENV" | cut -f1))"
