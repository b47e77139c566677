# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Everything the sgl_kernel role needs to know about a host, in one round trip.

Run with any Python 3.9+ (stdlib only); argv[1] is a JSON request:
  venv        a virtual environment to inspect (it may be missing)
  packages    distribution names whose installed version in that venv is wanted
  stamp       a JSON stamp file to read (it may be missing)
  stamp_dir   when set, the wheel the stamp names (stamp.wheel.file) in this directory is hashed
  hash        files to hash (sha256)
  exists      paths to test for existence
Prints one JSON object: cores, memory available to this host's cgroup, GPU presence, ccache, the
venv (site-packages, package versions, a pip-installed cuobjdump), the stamp and the hashes.
"""

import glob
import hashlib
import json
import os
import re
import shutil
import sys


def sha256(path):
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def mem_available():
    """MemAvailable, lowered to what the cgroup limit leaves (a container sees the host's RAM)."""
    avail = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    try:
        with open("/proc/self/cgroup") as f:
            rel = [line.strip().split(":", 2)[2] for line in f if line.startswith("0::")][0]
    except (OSError, IndexError):
        return avail
    path = "/sys/fs/cgroup" + rel.rstrip("/")
    while path.startswith("/sys/fs/cgroup"):
        try:
            with open(os.path.join(path, "memory.max")) as f:
                limit = f.read().strip()
            with open(os.path.join(path, "memory.current")) as f:
                current = int(f.read().strip())
            if limit != "max":
                left = max(0, int(limit) - current)
                avail = left if avail is None else min(avail, left)
        except (OSError, ValueError):
            pass
        if path == "/sys/fs/cgroup":
            break
        path = os.path.dirname(path)
    return avail


def inspect_venv(venv, packages):
    info = {"exists": False, "python": None, "site_packages": None, "cuobjdump": None,
            "packages": dict((p, None) for p in packages)}
    if not venv:
        return info
    python = os.path.join(venv, "bin", "python")
    info["exists"] = os.access(python, os.X_OK)
    info["python"] = python
    sites = sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")))
    if not sites:
        return info
    site = sites[-1]
    info["site_packages"] = site
    wanted = dict((normalize(p), p) for p in packages)
    for meta in glob.glob(os.path.join(site, "*.dist-info", "METADATA")):
        name = version = None
        with open(meta, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:"):
                    version = line.split(":", 1)[1].strip()
                elif not line.strip():
                    break
        if name and normalize(name) in wanted:
            info["packages"][wanted[normalize(name)]] = version
    # nvidia-cuda-cuobjdump puts the binary under nvidia/cu<major>/bin
    found = sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "cuobjdump")))
    info["cuobjdump"] = found[-1] if found else None
    return info


def main():
    req = json.loads(sys.argv[1])
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    out = {
        "cores": cores,
        "mem_available_bytes": mem_available(),
        "gpu_present": os.path.exists("/dev/nvidiactl"),
        "ccache": shutil.which("ccache"),
        "venv": inspect_venv(req.get("venv"), req.get("packages") or []),
        "stamp": None,
        "stamp_error": None,
        "stamp_wheel_sha256": None,
        "sha256": dict((p, sha256(p)) for p in req.get("hash") or []),
        "exists": dict((p, os.path.exists(p)) for p in req.get("exists") or []),
    }
    stamp = req.get("stamp")
    if stamp and os.path.exists(stamp):
        try:
            with open(stamp) as f:
                out["stamp"] = json.load(f)
        except (OSError, ValueError) as exc:
            out["stamp_error"] = "%s: %s" % (stamp, exc)
    wheel = (out["stamp"] or {}).get("wheel") or {}
    if req.get("stamp_dir") and wheel.get("file"):
        out["stamp_wheel_sha256"] = sha256(os.path.join(req["stamp_dir"], os.path.basename(wheel["file"])))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
