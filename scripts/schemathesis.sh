#!/usr/bin/env bash
# Schemathesis, the OpenAPI contract tester, in a virtualenv of its own for
# the API contract test (internal/apitest, docs/testing.md).
#
#   scripts/schemathesis.sh install   create .cache/schemathesis (a Python
#                                     virtualenv) with the pinned version from
#                                     PyPI, skipped when present; prints
#                                     TEST_SCHEMATHESIS=<path of the binary>
#                                     on stdout
#   scripts/schemathesis.sh run ARGS  run the installed binary with ARGS, e.g.
#                                     against a running API:
#                                     run run --url http://127.0.0.1:8080 \
#                                       http://127.0.0.1:8080/openapi.yaml
#
# Needs Python 3.10 or newer with the venv module, nothing else. Everything
# but the final TEST_SCHEMATHESIS line goes to stderr.
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/.cache/schemathesis
BIN=$VENV/bin/schemathesis

die() { echo "schemathesis.sh: $*" >&2; exit 1; }

cmd_install() {
	if [ ! -f "$VENV/.complete-$SCHEMATHESIS_VERSION" ]; then
		command -v python3 >/dev/null || die "python3 not found: install Python 3.10 or newer with its venv module"
		python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
			die "schemathesis $SCHEMATHESIS_VERSION needs Python 3.10 or newer (found: $(python3 --version 2>&1))"
		echo "installing schemathesis $SCHEMATHESIS_VERSION into $VENV..." >&2
		rm -rf "$VENV"
		python3 -m venv "$VENV" || die "python3 -m venv failed: install Python's venv module (Debian: python3-venv)"
		"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2
		"$BIN" --version >&2
		touch "$VENV/.complete-$SCHEMATHESIS_VERSION"
	fi
	echo "TEST_SCHEMATHESIS=$BIN"
}

case "${1:-}" in
install) cmd_install ;;
run)
	shift
	[ -x "$BIN" ] || die "not installed: run scripts/schemathesis.sh install"
	exec "$BIN" "$@"
	;;
*) die "usage: scripts/schemathesis.sh install | run ARGS..." ;;
esac
