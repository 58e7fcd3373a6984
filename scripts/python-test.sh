#!/usr/bin/env bash
# python-test.sh runs the Python client's tests against a loaderd built from
# this checkout (the test fixture builds it with go build). Needs the Debian
# packages of scripts/python-setup.sh. Extra arguments go to pytest.
#
# /usr/bin/python3 on purpose: a python3 earlier on PATH may be another
# interpreter that cannot see Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
py=/usr/bin/python3

python/protogen.sh --check
# Exit code 5 is pytest's "no tests collected": a broken collection must not
# pass as an empty success.
# A hung test dumps every thread's stack after 5 minutes, and the whole run
# is stopped after 20 rather than holding CI until its own limit.
rc=0
timeout -k 30 1200 "$py" -m pytest -q -p no:cacheprovider -o faulthandler_timeout=300 python/tests "$@" || rc=$?
if [ "$rc" = 5 ]; then
	echo "python-test: pytest collected no tests" >&2
	exit 1
fi
exit "$rc"
