# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start SGLang's router with the API key taken from the environment.

sglang_router.launch_router only takes the key as ``--api-key KEY``, which any local user could read
in the process list. The unit passes it as SGLANG_ROUTER_API_KEY (from a root-only EnvironmentFile)
and this launcher adds it to the parsed arguments in memory, so it is never part of a command line.

``launch_router.py --check ARGS...`` parses and validates ARGS with the installed router's own parser
and exits (0: valid, 2: rejected), without starting anything: the role runs it before it writes the unit.
"""

import os
import sys

KEY_VAR = "SGLANG_ROUTER_API_KEY"


def main(argv):
    from sglang_router.launch_router import launch_router, parse_router_args

    check = argv[:1] == ["--check"]
    if check:
        argv = argv[1:]
    args = parse_router_args(argv)  # argparse exits 2 on an unknown flag or a bad value
    # Asked of the parser itself, so every spelling it takes (--api-key, --api-k, --ap=KEY) is caught.
    if getattr(args, "api_key", None):
        sys.stderr.write("launch_router.py: pass the API key as %s, not as a flag (--api-key or an abbreviation of it)\n"
                         % KEY_VAR)
        return 2
    if check:
        try:
            validate = getattr(args, "_validate_router_args", None)
            if validate is not None:
                validate()
        except Exception as e:  # the router raises ValueError and friends for inconsistent settings
            sys.stderr.write("launch_router.py: %s\n" % e)
            return 2
        return 0
    key = os.environ.pop(KEY_VAR, "")
    if key:
        args.api_key = key
    launch_router(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
