# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for `hf download` in the lab (no hub access); verify.yml installs it with a shebang.

Records how it was called (argv, a hash of HF_TOKEN, whether the token shows in any process's
argv) and "downloads" the files of a local checkpoint into --local-dir, slowly, through
.incomplete files like the real CLI. A revision starting with "dead" fails like a bad revision; one starting
with "5a11ed" ("stalled") writes one partial file and then hangs, as a download on a dead connection does.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time

SOURCE = "/models/qwen3.5-397b-a17b-nvfp4"
RECORD = "/var/tmp/hf-fake-record.json"


def token_in_any_argv(token):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if token.encode() in f.read():
                    return True
        except OSError:
            continue
    return False


def main():
    parser = argparse.ArgumentParser(prog="hf")
    parser.add_argument("command", choices=["download"])
    parser.add_argument("repo")
    parser.add_argument("--revision", required=True)
    parser.add_argument("--local-dir", required=True)
    parser.add_argument("--max-workers", type=int, default=8)
    args = parser.parse_args()

    token = os.environ.get("HF_TOKEN")
    record = {
        "argv": sys.argv,
        "token_sha256": hashlib.sha256(token.encode()).hexdigest() if token else None,
        "token_in_argv": token_in_any_argv(token) if token else False,
        "hf_hub_offline": os.environ.get("HF_HUB_OFFLINE"),
        "started": time.time(),
    }
    with open(RECORD, "w") as f:
        json.dump(record, f)

    if args.revision.startswith("dead"):
        sys.stderr.write("RevisionNotFoundError: 404 Client Error. Revision Not Found for url: "
                         "https://huggingface.co/api/models/%s/revision/%s\n" % (args.repo, args.revision))
        return 3

    partial = os.path.join(args.local_dir, ".cache", "huggingface", "download")
    os.makedirs(partial, exist_ok=True)
    if args.revision.startswith("5a11ed"):
        with open(os.path.join(partial, "model-00001-of-00004.safetensors.incomplete"), "wb") as f:
            f.write(b"\0" * 65536)
        time.sleep(3600)
        return 0
    for name in sorted(os.listdir(SOURCE)):
        target = os.path.join(args.local_dir, name)
        if os.path.exists(target) and os.path.getsize(target) == os.path.getsize(os.path.join(SOURCE, name)):
            continue
        tmp = os.path.join(partial, name + ".incomplete")
        shutil.copyfile(os.path.join(SOURCE, name), tmp)
        # Slow enough that the role reports progress at least twice even on a loaded lab (a poll is four tasks).
        time.sleep(3)
        os.replace(tmp, target)
    print(args.local_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
