# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Every decision of the sglang_runtime role, from its settings (a mapping keyed by the role's variable names)
and the results its tasks registered: the pins and pip's command lines, whether the checkpoint must be staged,
which files to copy and how, the hub download's command, progress and failure, and the record the role publishes.
Runs on the controller (filters); the pin rule itself is ``_pins``. Bad settings raise :class:`RuntimeSettingsError`
with a message that names the setting and the fix.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time

from ansible_collections.llmops.sglang.plugins.module_utils._coerce import boolean_or_none, is_empty, to_int
from ansible_collections.llmops.sglang.plugins.module_utils._files import unsynced
from ansible_collections.llmops.sglang.plugins.plugin_utils._pins import PinError, canonical_name, index_options, unmet
from ansible_collections.llmops.sglang.plugins.plugin_utils._role_filter import ran, registered

try:  # the controller always has ansible-core; the same bytes-to-text as the human_readable filter
    from ansible.module_utils.common.text.formatters import bytes_to_human
except ImportError:  # pragma: no cover
    bytes_to_human = None

PIP_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
PIP_VERSION = re.compile(r"^[0-9][0-9A-Za-z.!+_-]*$")
PIP_HASH = re.compile(r"^sha(256|384|512):[0-9a-f]+$")
PIP_QUIET = ["--disable-pip-version-check", "--no-input"]
NFS_EXPORT = re.compile(r"^[^:]+:/")
HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
HF_REVISION = re.compile(r"^[0-9a-f]{40}$")
# Reads the token from stdin into the CLI's environment (never argv); an empty line means no token.
STAGED_SOURCES = ("controller", "hf")
# Directories of the system and its users: never a checkpoint directory the role creates, downloads into or mounts
# over (it would take their files' place or, before, make root chmod /tmp 0755). Anything under the pseudo
# filesystems is refused too.
# (/mnt, /media and /srv are where exports and site data are meant to go: not in the list.)
SYSTEM_DIRS = frozenset(("/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
                         "/lost+found", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/sys", "/tmp", "/usr", "/usr/bin",
                         "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var", "/var/lib", "/var/log", "/var/tmp"))
PSEUDO_FS = ("/proc/", "/sys/", "/dev/", "/run/", "/boot/")
P = "sglang_runtime_"
# The settings the role hands over, by name (its vars/main.yml lists them as _sglang_runtime_setting_names; a test keeps
# the two equal). The hub token is not among them: only the download module's no_log option has it.
SETTINGS = tuple(P + name for name in (
    "user", "group", "home", "venv", "python", "packages", "pip_source", "pip_index_url", "pip_extra_index_urls",
    "pip_wheelhouse", "pip_require_hashes", "pip_extra_args", "checkpoint_source", "checkpoint_path",
    "checkpoint_require_quant_config", "checkpoint_controller_src", "checkpoint_copy_method", "checkpoint_nfs_src",
    "checkpoint_nfs_mountpoint", "checkpoint_nfs_fstype", "checkpoint_nfs_opts", "checkpoint_hf_repo",
    "checkpoint_hf_revision", "checkpoint_hf_cli", "checkpoint_hf_max_workers", "checkpoint_timeout",
    "checkpoint_progress_interval", "download_stall_timeout", "server_environment", "stamp_path",
))


class RuntimeSettingsError(ValueError):
    """A setting or a registered result the role cannot use; the message names it and the fix."""


def _bool(value, name):
    got = False if is_empty(value) else boolean_or_none(value)
    if got is not None:
        return got
    raise RuntimeSettingsError("%s%s must be true or false, not %r" % (P, name, value))


def _int(value, name, minimum=1):
    number = to_int(value)
    if number is None or isinstance(value, bool) or number < minimum:
        raise RuntimeSettingsError("%s%s must be a whole number of at least %d, not %r" % (P, name, minimum, value))
    return number


def human_bytes(size):
    """Bytes as the human_readable filter writes them (``1.00 KB``)."""
    return bytes_to_human(int(size))


def _hashes(pin):
    hashes = pin.get("hash")
    if isinstance(hashes, str):
        return [hashes]
    return list(hashes) if isinstance(hashes, (list, tuple)) else hashes or []


def _pin_problem(pin, require_hashes):
    """Why one entry of sglang_runtime_packages is not a pin (None when it is one)."""
    if not isinstance(pin, dict):
        return "not a mapping"
    name, version, hashes = pin.get("name"), pin.get("version"), _hashes(pin)
    if not (isinstance(name, str) and PIP_NAME.match(name)):
        return "name"
    if not (isinstance(version, str) and PIP_VERSION.match(version)):
        return "version"
    if isinstance(pin.get("extras"), str):
        return "extras"
    if not isinstance(hashes, list) or not all(isinstance(h, str) and PIP_HASH.match(h) for h in hashes):
        return "hash"
    if require_hashes and not hashes:
        return "hash"
    return None


def check_pins(packages, require_hashes):
    """Fail on the first entry that is not a pin, with the form to write."""
    for pin in packages:
        if _pin_problem(pin, require_hashes):
            raise RuntimeSettingsError(
                '%spackages entry %s is not a pin: give name, version as a quoted exact release (version: "0.5.23"), '
                'extras as a list, and hash as "sha256:<hex>" or a list of them (%s).'
                % (P, pin, "every entry needs one: %spip_require_hashes is true" % P if require_hashes else "optional"))


def pip_options(settings):
    """pip install options for the configured source: a wheelhouse means no index at all."""
    options = PIP_QUIET + ["--progress-bar=off"]
    if settings[P + "pip_source"] == "wheelhouse":
        options += index_options(wheelhouse=settings[P + "pip_wheelhouse"])
    else:
        options += index_options(index_url=settings.get(P + "pip_index_url"),
                                 extra_index_urls=settings.get(P + "pip_extra_index_urls"))
    if _bool(settings.get(P + "pip_require_hashes"), "pip_require_hashes"):
        options.append("--require-hashes")
    return options + [str(arg) for arg in settings.get(P + "pip_extra_args") or []]


def requirements_text(packages, require_hashes):
    """The requirements file below its managed-by line: one pin a line, hashes as continuation lines."""
    lines = ["# The pins of %spackages%s." % (P, " with the hashes pip checks (--require-hashes)" if require_hashes else "")]
    for pin in packages:
        extras = "[%s]" % ",".join(str(e) for e in pin["extras"]) if pin.get("extras") else ""
        hashes = _hashes(pin) if require_hashes else []
        lines.append("%s%s==%s" % (pin["name"], extras, pin["version"])
                     + "".join(" \\\n    --hash=%s" % h for h in hashes))
    return "\n".join(lines) + "\n"


def pip_list(result):
    """The packages of a ``pip list --format=json`` run (registered, or a host_state command); a skipped or absent run,
    or a venv not created yet (its python not found), lists none."""
    if not isinstance(result, dict) or result.get("skipped") or result.get("not_found"):
        return []
    if result.get("rc") not in (0, None) or result.get("timed_out"):
        raise RuntimeSettingsError("pip list failed in the venv (rc %s%s): %s; check the venv's python and pip, or "
                                   "remove the venv so that the role creates it again"
                                   % (result.get("rc"), ", timed out" if result.get("timed_out") else "",
                                      str(result.get("stderr") or "")[-500:]))
    if not result.get("stdout"):
        return []
    try:
        listed = json.loads(result["stdout"])
    except ValueError:
        listed = None
    if not isinstance(listed, list):
        raise RuntimeSettingsError("pip list --format=json printed no JSON list (%r): check the venv's pip"
                                   % str(result["stdout"])[:200])
    return listed


def check_wheelhouse(settings, wheelhouse):
    """For the wheelhouse source, the registered stat of the wheelhouse must show a directory."""
    if settings[P + "pip_source"] == "wheelhouse" and not ((wheelhouse or {}).get("stat") or {}).get("isdir"):
        raise RuntimeSettingsError(
            "%spip_wheelhouse %s is not a directory on the host: copy the wheels there first (pip download -d DIR ... "
            "on a connected machine)." % (P, settings[P + "pip_wheelhouse"]))


def pip_plan(settings, wheelhouse=None, listed=None, listed_after=None):
    """Checks the pins and the source (and, given its registered stat, the wheelhouse) and returns the venv's paths,
    pip's command lines, the requirements file, the pins as pip names (``name==version``) and, from the registered
    ``pip list`` runs (the later one wins when it ran), what the venv holds and which pins it does not meet (the
    ``_pins`` rule)."""
    packages = settings[P + "packages"]
    require_hashes = _bool(settings.get(P + "pip_require_hashes"), "pip_require_hashes")
    if not isinstance(packages, list):
        raise RuntimeSettingsError("%spackages must be a list of pins ({name, version}), not %r" % (P, packages))
    check_pins(packages, require_hashes)
    if not packages or settings[P + "pip_source"] not in ("index", "wheelhouse"):
        raise RuntimeSettingsError('%spip_source must be "index" or "wheelhouse" (not %s) and %spackages must not be '
                                   "empty." % (P, settings[P + "pip_source"], P))
    if wheelhouse is not None:
        check_wheelhouse(settings, wheelhouse)
    venv = str(settings[P + "venv"])
    python = venv + "/bin/python"
    requirements = venv + "/requirements.txt"
    options = pip_options(settings)
    pins = ["%s==%s" % (canonical_name(p["name"]), p["version"]) for p in packages]
    after = listed_after if isinstance(listed_after, dict) and not listed_after.get("skipped") else None
    installed = pip_list(after if after is not None else listed)
    try:
        pending = unmet(pins, installed)
    except PinError as exc:
        raise RuntimeSettingsError("%spackages: %s" % (P, exc))
    return {
        "venv": venv,
        "venv_parent": os.path.dirname(venv),
        "venv_argv": [str(settings[P + "python"]), "-m", "venv", venv],
        "python": python,
        "requirements_path": requirements,
        "requirements": requirements_text(packages, require_hashes),
        "options": options,
        "pins": pins,
        "list_argv": [python, "-m", "pip", "list", "--format=json"] + PIP_QUIET,
        "install_argv": [python, "-m", "pip", "install"] + options + ["-r", requirements],
        "installed": installed,
        # pip install ran (the list after it ran): the record takes its time as installed_at
        "installed_now": after is not None,
        "pending": pending,
        "unmet_message": "pip finished but the venv %s does not hold %s: the index or wheelhouse offers other versions "
                         "(check the pins and the wheel files)." % (venv, ", ".join(pending)),
        "met_message": "%d pins met in %s" % (len(pins), venv),
    }


def pip_state(settings, state, listed_after=None):
    """``pip_plan`` from a host_state result (the wheelhouse's stat, the ``pip_list`` command, the venv's parent
    directory and the requirements file compared) plus ``changes``: what the role must install or write, one line
    each; empty when nothing differs, so the writes are skipped."""
    stat = (state.get("stat") or {}).get(str(settings[P + "pip_wheelhouse"])) or {}
    listed = (state.get("commands") or {}).get("pip_list")
    plan = pip_plan(settings, {"stat": stat}, listed, listed_after)
    files = state.get("files") or {}
    changes = ["system packages not installed: %s" % ", ".join(state["packages_missing"])] if state.get("packages_missing") else []
    for path in (plan["venv_parent"], plan["requirements_path"]):
        if (files.get(path) or {}).get("changed"):
            changes.append("%s differs (%s)" % (path, ", ".join(files[path]["differs"])))
    if (listed or {}).get("not_found"):
        changes.append("no venv at %s" % plan["venv"])
    if plan["pending"]:
        changes.append("pins not met: %s" % ", ".join(plan["pending"]))
    return dict(plan, changes=changes)


def system_dir(path):
    """The directory path names, normalized (``//tmp/``, ``/models/../tmp`` -> ``/tmp``), when it is a system
    directory or lies under a pseudo filesystem (SYSTEM_DIRS, PSEUDO_FS); else None."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    normal = "/" + os.path.normpath(path).strip("/")
    under_pseudo = (normal + "/").startswith(PSEUDO_FS) and not normal.startswith("/dev/shm/")
    return normal if normal in SYSTEM_DIRS or under_pseudo else None


def check_checkpoint_settings(settings):
    """The checkpoint settings of the chosen source, each failure naming the setting."""
    source, path = settings[P + "checkpoint_source"], settings[P + "checkpoint_path"]
    if (source not in ("local", "nfs", "controller", "hf") or not (isinstance(path, str) and os.path.isabs(path))
            or settings[P + "checkpoint_copy_method"] not in ("auto", "synchronize", "copy")):
        raise RuntimeSettingsError(
            "%scheckpoint_source must be local, nfs, controller or hf (not %s), %scheckpoint_path an absolute path "
            "(not %s) and %scheckpoint_copy_method auto, synchronize or copy." % (P, source, P, path, P))
    name, where = (("checkpoint_path", path) if source in STAGED_SOURCES else
                   ("checkpoint_nfs_mountpoint", str(settings.get(P + "checkpoint_nfs_mountpoint"))) if source == "nfs" else
                   (None, None))
    if name and system_dir(where):
        raise RuntimeSettingsError(
            "%s%s is %s, a system directory: with source %s the role %s there. Use a directory of the checkpoint's own, "
            "such as /models/<name> (created root-owned 0755 when missing; an existing one keeps its owner and mode)."
            % (P, name, system_dir(where), source, "mounts the export" if source == "nfs" else "creates the checkpoint "
               "directory and writes the checkpoint"))
    if source == "controller" and not os.path.isabs(str(settings.get(P + "checkpoint_controller_src") or "")):
        raise RuntimeSettingsError("%scheckpoint_source=controller needs %scheckpoint_controller_src, an absolute "
                                   "directory on the controller." % (P, P))
    mount = str(settings.get(P + "checkpoint_nfs_mountpoint")).rstrip("/")
    if source == "nfs" and not (NFS_EXPORT.match(str(settings.get(P + "checkpoint_nfs_src") or ""))
                                and (path + "/").startswith(mount + "/")):
        raise RuntimeSettingsError(
            '%scheckpoint_source=nfs needs %scheckpoint_nfs_src as "server:/export" and a %scheckpoint_path inside '
            "%scheckpoint_nfs_mountpoint (%s)." % (P, P, P, P, settings.get(P + "checkpoint_nfs_mountpoint")))
    revision = settings.get(P + "checkpoint_hf_revision")
    if source == "hf" and not (HF_REPO.match(str(settings.get(P + "checkpoint_hf_repo") or ""))
                               and HF_REVISION.match(str(revision or ""))):
        raise RuntimeSettingsError(
            '%scheckpoint_source=hf needs %scheckpoint_hf_repo as "owner/name" and %scheckpoint_hf_revision pinned to '
            "a full 40-character commit id (a branch such as main moves, and hosts would load different weights); "
            "not %s." % (P, P, P, revision))


def needs_staging(settings, before):
    """Whether the checkpoint must be copied or downloaded: only for a staged source, and only when the copy on the
    host (``before``, a checkpoint_info result) is incomplete or lacks a required quantization config."""
    if settings[P + "checkpoint_source"] not in STAGED_SOURCES:
        return False
    before = before if isinstance(before, dict) else {}
    complete = bool((before.get("shards") or {}).get("ok"))
    quant_ok = ((before.get("files") or {}).get("hf_quant_config_json") is not None
                or not _bool(settings.get(P + "checkpoint_require_quant_config"), "checkpoint_require_quant_config"))
    return not (complete and quant_ok)


def server_environment(settings):
    """The server's environment: the extra settings, and HF_HUB_OFFLINE=1 always (the hub is never contacted)."""
    environment = dict(settings.get(P + "server_environment") or {})
    environment["HF_HUB_OFFLINE"] = "1"
    return environment


def check_quant_config(settings, verified):
    """Fail when the verified checkpoint lacks hf_quant_config.json and the settings require it."""
    if (isinstance(verified, dict) and not verified.get("skipped")
            and _bool(settings.get(P + "checkpoint_require_quant_config"), "checkpoint_require_quant_config")
            and (verified.get("files") or {}).get("hf_quant_config_json") is None):
        raise RuntimeSettingsError(
            "checkpoint %s has no hf_quant_config.json: the NVFP4 checkpoint describes its quantization there; stage "
            "the complete repository (or set %scheckpoint_require_quant_config: false)."
            % (settings[P + "checkpoint_path"], P))


def create_dir(path, stat):
    """Whether the role creates ``path`` (with its owner and mode), from a registered ``stat`` of it: only when it does
    not exist. An existing directory is never changed (it may be an operator's, with its own owner and mode); anything
    else there fails, naming it. None when ``stat`` did not run."""
    if not ran(stat):
        return None
    found = stat.get("stat") or {}
    if not found.get("exists"):
        return True
    if found.get("isdir"):
        return False
    raise RuntimeSettingsError("%scheckpoint_path %s exists and is not a directory: move it away or choose another "
                               "path." % (P, path))


def checkpoint_plan(settings, before=None, gate=None, dest=None):
    """Checks the checkpoint settings; returns whether to verify before staging, whether to stage (from the
    registered ``before`` verification; None without it), whether the gate runs (not when the verification before
    staging found the checkpoint complete: that result, which asked SGLang too, is the gate's), the server environment
    and, for the hub, the download command. Given the ``gate``'s result, returns the verification that counts as
    ``verified`` and fails when a required quantization config is missing. Given ``dest`` (a registered stat of the
    checkpoint path), ``create_dir`` says whether staging creates the directory (see ``create_dir``)."""
    check_checkpoint_settings(settings)
    source, path = settings[P + "checkpoint_source"], settings[P + "checkpoint_path"]
    stage = None if before is None else needs_staging(settings, before)
    complete_before = source in STAGED_SOURCES and ran(before) and stage is False
    verified = gate if ran(gate) else before if complete_before else {"skipped": True}
    check_quant_config(settings, verified)
    plan = {"source": source, "path": path, "verify_before": source in STAGED_SOURCES,
            "stage": stage, "gate": not complete_before, "verified": verified, "create_dir": create_dir(path, dest),
            "environment": server_environment(settings),
            # the NFS export to mount: one entry for source nfs, none otherwise
            "nfs": [{"src": settings[P + "checkpoint_nfs_src"], "path": settings[P + "checkpoint_nfs_mountpoint"],
                     "fstype": settings[P + "checkpoint_nfs_fstype"], "opts": settings[P + "checkpoint_nfs_opts"]}]
            if source == "nfs" else []}
    if source == "hf":
        timeout = _int(settings[P + "checkpoint_timeout"], "checkpoint_timeout")
        interval = _int(settings[P + "checkpoint_progress_interval"], "checkpoint_progress_interval")
        repo, revision = settings[P + "checkpoint_hf_repo"], settings[P + "checkpoint_hf_revision"]
        stall = _int(settings[P + "download_stall_timeout"], "download_stall_timeout", 0)
        plan["hf"] = {
            # llmops.sglang.hub_download's options; the role adds the token
            "args": {"cli": str(settings[P + "checkpoint_hf_cli"]), "repo": repo, "revision": revision, "local_dir": path,
                     "max_workers": _int(settings[P + "checkpoint_hf_max_workers"], "checkpoint_hf_max_workers"),
                     "stall_timeout": stall},
            "what": "%s download %s@%s" % (settings[P + "checkpoint_hf_cli"], repo, revision),
            "check_mode": "check mode: would download %s@%s into %s" % (repo, revision, path),
            "label": "%s@%s" % (repo, revision[:12]),
            "timeout": timeout,
            "interval": interval,
            # Past the progress lines the role only waits: one poll per interval up to the timeout.
            "retries": timeout // interval + 1,
        }
    return plan


def _rsync_found(result):
    return isinstance(result, dict) and result.get("rc", 1) == 0


def copy_plan(settings, source_files, host_files=None, rsync=None):
    """The files to copy from the controller (relative path and size differ on the host: missing, truncated,
    replaced), in path order, with their progress labels, the subdirectories to create and the copy method
    (synchronize when forced, or with auto when rsync answered on both sides; the copy module otherwise).
    ``source_files`` and ``host_files`` are registered find results; a skipped host find means the directory does
    not exist yet in check mode, so nothing is copied (``staged`` still names every file). ``rsync`` holds the
    registered ``rsync --version`` runs on the controller and on the host. The directories the host find lists
    (``isdir``) are left out of ``dirs``: the role sets owner and mode only on directories it creates."""
    rsync_controller, rsync_host = (list(rsync or []) + [None, None])[:2]
    dry = isinstance(host_files, dict) and bool(host_files.get("skipped"))
    src, dest = settings[P + "checkpoint_controller_src"], settings[P + "checkpoint_path"]
    if not (source_files or {}).get("files"):
        raise RuntimeSettingsError("%scheckpoint_controller_src %s holds no files on the controller." % (P, src))

    # the host find lists regular files and directories (file_type any): only the files are compared
    host_entries = [f for f in ((host_files if isinstance(host_files, dict) else {}).get("files") or []) if isinstance(f, dict)]
    existing = set(os.path.relpath(f["path"], dest) for f in host_entries if f.get("isdir"))
    wanted = unsynced(source_files, {"files": [f for f in host_entries if f.get("isreg", True)]}, src, dest)
    method = settings[P + "checkpoint_copy_method"]
    both = _rsync_found(rsync_controller) and _rsync_found(rsync_host)
    chosen = "synchronize" if method == "synchronize" or (method == "auto" and both) else "copy"
    if chosen == "synchronize" and not both:
        raise RuntimeSettingsError(
            "%scheckpoint_copy_method=synchronize needs rsync on the controller (%s) and on the host (%s): install it "
            "or use copy_method auto/copy." % (P, "found" if _rsync_found(rsync_controller) else "missing",
                                               "found" if _rsync_found(rsync_host) else "missing"))
    total, done, files = sum(size for _rel, size in wanted), 0, []
    for index, (rel, size) in enumerate(wanted, 1):
        done += size
        files.append({"path": rel, "size": size, "src": "%s/%s" % (src, rel), "dest": "%s/%s" % (dest, rel),
                      "label": "%s (%s): %d/%d files, %s of %s copied" % (
                          rel, human_bytes(size), index, len(wanted), human_bytes(done), human_bytes(total))})
    dirs = []
    for rel, _size in wanted:
        parent = os.path.dirname(rel)
        if parent and parent not in dirs and parent not in existing:
            dirs.append(parent)
    if dry:
        files, dirs = [], []
    return {"method": chosen, "dirs": ["%s/%s" % (dest, d) for d in dirs],
            # one list per method (the other one empty), so each copy task loops over its own
            "synchronize_files": files if chosen == "synchronize" else [], "copy_files": files if chosen == "copy" else [],
            "staged": {"method": chosen, "files": [rel for rel, _size in wanted], "bytes": total}}


def hf_download(job, plan, sizes=None, started=None, final=None, now=None):
    """The hub download's state from the registered async_status results (``final`` when it ran, else ``job``):
    finished, ok, a progress line (the bytes of a registered ``find -printf '%s\\n'`` under the checkpoint path,
    seconds since ``started``) and the failure message (hub_download's, which names a stall's cause and fixes, and
    the last 15 lines of the CLI's stderr)."""
    hf = plan["hf"]
    job = job if isinstance(job, dict) else {}
    result = final if isinstance(final, dict) and not final.get("skipped") else job
    finished = _bool(result.get("finished", False), "download job's finished")
    lines = (sizes or {}).get("stdout_lines") or []
    state = "downloading"
    if _bool(job.get("finished", False), "download job's finished"):
        state = "stalled" if job.get("stalled") else "done"
    elapsed = int(time.time() if now is None else now) - int(started or 0)
    if not finished:
        why = "did not finish within %s s" % hf["timeout"]
    elif result.get("stalled"):
        why = "stalled"  # hub_download's message says for how long and what to do
    else:
        why = "failed (rc %s)" % result.get("rc", "none")
    return {
        "finished": finished,
        "ok": finished and result.get("rc", 1) == 0,
        "progress": "%s %s: %s in %s after %d s" % (hf["label"], state, human_bytes(sum(int(n) for n in lines)),
                                                    plan["path"], elapsed),
        "message": "%s %s:\n%s %s" % (hf["what"], why, result.get("msg", ""),
                                      " | ".join((result.get("stderr_lines") or [])[-15:])),
    }


def runtime_record(pip, settings, old_stamp=None, verified=None, now=None):
    """The record the role publishes (fact sglang_runtime_info) and writes to the host stamp. ``pip`` is
    ``pip_plan``'s result after the install (when pip installed something, installed_at is ``now``, the
    controller's UTC time by default),
    ``old_stamp`` the registered slurp of the earlier stamp (its installed_at is kept while nothing is installed;
    a failed or skipped read has none), ``verified`` the gate's checkpoint_info result."""
    installed_at = None
    if pip.get("installed_now"):
        installed_at = now or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    elif isinstance(old_stamp, dict) and old_stamp.get("content"):
        try:
            installed_at = json.loads(base64.b64decode(old_stamp["content"])).get("installed_at")
        except (ValueError, TypeError, AttributeError):
            installed_at = None  # an unreadable stamp is rewritten; it only lacks the earlier install time
    verified = verified if isinstance(verified, dict) else {"skipped": True}
    ran = not verified.get("skipped")
    return {
        "user": settings[P + "user"], "group": settings[P + "group"], "home": settings[P + "home"],
        "venv": pip["venv"], "python": pip["python"], "pip_source": settings[P + "pip_source"],
        "pip_options": pip["options"], "requirements": pip["requirements_path"], "pins": pip["pins"],
        "installed": pip["installed"], "installed_at": installed_at,
        "checkpoint": {
            "source": settings[P + "checkpoint_source"], "path": settings[P + "checkpoint_path"],
            "verified": ran and not verified.get("failed", False),
            "shards": (verified.get("shards") or {}).get("count"),
            "bytes": (verified.get("shards") or {}).get("on_disk_bytes"),
            "quant_method": (verified.get("quantization") or {}).get("method"),
            "kv_cache_dtype_auto": verified.get("kv_cache_dtype_auto"),
            # "capability 12.0" when the role had the GPU (sglang_runtime_gpu), else "any GPU"
            "kv_cache_dtype_auto_decided_for": verified.get("kv_cache_dtype_auto_decided_for"),
        },
        "environment": server_environment(settings),
    }


# The results the role's tasks register or set, by name (vars/main.yml: _sglang_runtime_result_names; a test keeps the
# two equal): each phase reads the ones it needs, None for one that has not run (registered).
RESULTS = tuple("_sglang_runtime_" + name for name in (
    "state", "pip_list_after", "pip", "before", "dir", "gate", "checkpoint", "src", "dest", "rsync_ctl", "rsync_host",
    "hf_status", "hf_sizes", "hf_started", "hf_final"))


def _results(results):
    if not isinstance(results, dict):
        raise RuntimeSettingsError("the role's results must be a mapping of _sglang_runtime_result_names, not %s"
                                   % type(results).__name__)
    return lambda name: registered(results, "_sglang_runtime_" + name)


def _pip(settings, results):
    """The pins and commands (no host state yet), or with the host_state result what differs on the host."""
    r = _results(results)
    return pip_plan(settings) if r("state") is None else pip_state(settings, r("state"), r("pip_list_after"))


def _checkpoint(settings, results):
    r = _results(results)
    return checkpoint_plan(settings, r("before"), r("gate"), r("dir"))


def _copy(settings, results):
    r = _results(results)
    return copy_plan(settings, r("src"), r("dest"), [r("rsync_ctl") or {}, r("rsync_host") or {}])


def _hf_download(settings, results):
    r = _results(results)
    return hf_download(r("hf_status"), checkpoint_plan(settings), r("hf_sizes"), r("hf_started"), r("hf_final"))


def _record(settings, results):
    r = _results(results)
    state, stamp_path = r("state") or {}, settings[P + "stamp_path"]
    return runtime_record(r("pip"), settings, (state.get("read") or {}).get(stamp_path), (r("checkpoint") or {}).get("verified"))


# The phases of the role's one filter, llmops.sglang.sglang_runtime_plan: each takes the settings and the results.
PHASES = {"pip": _pip, "checkpoint": _checkpoint, "copy": _copy, "hf_download": _hf_download, "record": _record}
ERRORS = (RuntimeSettingsError,)
