# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The answer channel of a script that ``_process.ask_python`` sends to another interpreter (SGLang's).

``ask_python`` sends this file's source ahead of the script's own, as one program: the script calls
``answer(main, MARKER)`` and gets the JSON request from stdin, stdout kept for its one answer line while whatever
the libraries it imports print goes to stderr. Python 3.9+, standard library only, no ``__future__`` import
(the two sources become one program).
"""

import json
import sys


def answer(main, marker):
    """Print ``marker + json(main(request))`` on stdout, the request read from stdin as JSON."""
    request = json.loads(sys.stdin.read())
    out = sys.stdout
    sys.stdout = sys.stderr          # whatever SGLang prints stays off the result channel
    result = main(request, {"python_version": "%d.%d.%d" % tuple(sys.version_info[:3])})
    out.write(marker + json.dumps(result) + "\n")
    out.flush()
