# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run on a lab host with the secrets on stdin (one a line): where on the host can they be read?

Prints JSON: every process whose command line holds one, the hits in the unit, its records and `systemctl show`,
in the whole journal (every unit, systemd's own lines), and whether the journal shows SGLang's server_args dump
with the key masked (so the scan looked at the lines that would hold it).
"""

import glob
import json
import subprocess
import sys

SECRETS = [line.encode() for line in sys.stdin.read().splitlines() if line]
FILES = ["/etc/systemd/system/sglang-qwen.service", "/etc/systemd/system/sglang-qwen.service.prev",
         "/etc/sglang/sglang-qwen.argv.json", "/etc/sglang/sglang-qwen.argv.json.prev"]


def hits(data):
    return sum(data.count(secret) for secret in SECRETS)


def main():
    out = {"processes": 0, "cmdline": [], "files": {}}
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue  # the process ended
        out["processes"] += 1
        if hits(data):
            out["cmdline"].append(path)  # the path only: the command line holds the secret
    for path in FILES:
        try:
            with open(path, "rb") as handle:
                out["files"][path] = hits(handle.read())
        except OSError:
            pass
    show = subprocess.run(["systemctl", "show", "sglang-qwen.service"], stdout=subprocess.PIPE, check=False).stdout
    out["systemctl_show"] = hits(show)
    journal = subprocess.run(["journalctl", "--no-pager", "-o", "cat"], stdout=subprocess.PIPE, check=False).stdout
    out["journal_lines"] = journal.count(b"\n")
    out["journal"] = hits(journal)
    out["journal_masked_dump"] = b"api_key='********'" in journal or b"'api_key': '********'" in journal
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
