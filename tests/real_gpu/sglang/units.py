"""A stand-in for `systemctl show`, `systemctl cat` and `journalctl`, answering for servers the real-SGLang run started itself.

The GPU machine has no systemd, but `sglang_wait_ready` and the `audit` role's guard read a unit: its state
and ExecStart (`systemctl show`, and the unit file `systemctl cat` prints, its ExecStart= written by the
collection's own quoting) and the journal of its current invocation (`journalctl
_SYSTEMD_INVOCATION_ID=ID _SYSTEMD_UNIT=UNIT _TRANSPORT=stdout -o json --output-fields=...`). run.py starts each
server with setsid, its output appended to a log file, and writes UNITS/NAME.json ({pid, argv, env, log,
invocation_id, start_monotonic_us}); called as `systemctl` or `journalctl` (run.py puts both names first on PATH;
RG_TOOL says which), this script answers from that record: the unit is active while its process lives, ExecStart is
the argv, the journal is the log file as journald 252 gives a unit's stdout: one JSON entry per line, a line longer
than LineMax (48 KiB) cut into entries marked `_LINE_BREAK=line-max` as journald cuts it, a message that is not
printable UTF-8 as an array of bytes, the cursor's `i=` the byte offset. There is no PID 1 here: its messages
(`_PID=1`) are no entries. Only what the collection asks is answered; anything else exits 2 with the reason.
UNITS is $RG_UNITS.
"""

import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "collections"))
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import command_line  # noqa: E402  pylint: disable=wrong-import-position

SHOW_DEFAULTS = {"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "Result": "success", "NRestarts": "0",
                 "InvocationID": "", "MainPID": "0", "ExecMainCode": "0", "ExecMainStatus": "0",
                 "ExecMainStartTimestampMonotonic": "0", "ControlGroup": "", "TimeoutStopUSec": "1min 30s",
                 "ExecStart": "", "Environment": ""}


def units_dir():
    return os.environ.get("RG_UNITS", "/tmp/real-gpu/units")


def load(unit):
    name = unit[:-len(".service")] if unit.endswith(".service") else unit
    try:
        with open(os.path.join(units_dir(), name + ".json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def properties(rec):
    props = dict(SHOW_DEFAULTS)
    if rec is None:
        return props
    running = alive(rec["pid"])
    argv = " ".join(rec["argv"])
    props.update(LoadState="loaded", ActiveState="active" if running else "inactive", SubState="running" if running else "dead",
                 InvocationID=rec["invocation_id"], MainPID=str(rec["pid"] if running else 0),
                 ExecMainStartTimestampMonotonic=str(rec["start_monotonic_us"]),
                 Environment=" ".join("%s=%s" % kv for kv in sorted(rec.get("env", {}).items())),
                 # systemd's rendering of one ExecStart command
                 ExecStart="{ path=%s ; argv[]=%s ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=%d ; "
                           "code=(null) ; status=0/0 }" % (rec["argv"][0], argv, rec["pid"]))
    return props


def cat(args):
    units = [arg for arg in args if arg != "--"]
    rec = load(units[0]) if len(units) == 1 else None
    if rec is None:
        return fail("No files found for %r." % units)
    name = units[0] if units[0].endswith(".service") else units[0] + ".service"
    sys.stdout.write("# /etc/systemd/system/%s\n[Service]\nExecStart=%s\n" % (name, command_line(rec["argv"])))
    return 0


def systemctl(args):
    if args and args[0] == "cat":
        return cat(args[1:])
    if not args or args[0] != "show":
        return fail("systemctl stand-in: only 'show' and 'cat' are answered, not %r" % args)
    wanted, value_only, units, rest = [], False, [], args[1:]
    while rest:
        arg = rest.pop(0)
        if arg == "--value":
            value_only = True
        elif arg in ("-p", "--property"):
            wanted += rest.pop(0).split(",")
        elif arg.startswith("--property="):
            wanted += arg.split("=", 1)[1].split(",")
        elif arg == "--":
            units += rest
            rest = []
        elif arg.startswith("-"):
            return fail("systemctl stand-in: option %s is not answered" % arg)
        else:
            units.append(arg)
    if len(units) != 1:
        return fail("systemctl stand-in: one unit, got %r" % units)
    props = properties(load(units[0]))
    for key in wanted or sorted(props):
        if key not in props:
            return fail("systemctl stand-in: property %s is not answered" % key)
        sys.stdout.write((props[key] if value_only else "%s=%s" % (key, props[key])) + "\n")
    return 0


LINE_MAX = 49152


def printable(data):
    """journald's rule for a string in JSON: valid UTF-8 without control characters but tab and newline."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in text) else text


def journalctl(args):
    matches, cursor, fields = {}, 0, None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg.split("=", 1)[0] in ("_SYSTEMD_INVOCATION_ID", "_SYSTEMD_UNIT", "_TRANSPORT", "_PID", "_UID", "INVOCATION_ID"):
            matches[arg.split("=", 1)[0]] = arg.split("=", 1)[1]
        elif arg == "--after-cursor":
            cursor = int(rest.pop(0).split(";i=", 1)[1].split(";", 1)[0], 16)
        elif arg.startswith("--output-fields="):
            fields = arg.split("=", 1)[1].split(",")
        elif arg == "-o":
            if rest.pop(0) != "json":
                return fail("journalctl stand-in: only -o json is answered")
        elif arg not in ("--no-pager", "--all"):
            return fail("journalctl stand-in: argument %s is not answered" % arg)
    if fields is None:
        return fail("journalctl stand-in: --output-fields= is needed")
    rec = None
    for name in sorted(os.listdir(units_dir())):
        cand = load(name[:-len(".json")]) if name.endswith(".json") else None
        if cand and cand["invocation_id"] == matches.get("_SYSTEMD_INVOCATION_ID"):
            rec, unit = cand, name[:-len(".json")] + ".service"
    if rec is None or matches.get("_PID") == "1" or matches.get("_SYSTEMD_UNIT", unit) != unit \
            or matches.get("_TRANSPORT", "stdout") != "stdout":
        return 1      # journalctl: no entries, no words
    with open(rec["log"], "rb") as fh:
        fh.seek(cursor)
        data = fh.read()
    # complete lines only: a half-written line waits for the next read
    data = data[:data.rfind(b"\n") + 1]
    if not data:
        return 1
    known = {"_SYSTEMD_INVOCATION_ID": rec["invocation_id"], "_SYSTEMD_UNIT": unit, "_TRANSPORT": "stdout",
             "_PID": str(rec["pid"]), "_UID": "0", "_STREAM_ID": rec["invocation_id"]}
    out = sys.stdout.buffer
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        cut = min(end, pos + LINE_MAX)
        message = data[pos:cut]
        values = dict(known, MESSAGE=printable(message) if printable(message) is not None else list(message))
        if cut < end:
            values["_LINE_BREAK"] = "line-max"
        pos = cut if cut < end else end + 1
        entry = {"__CURSOR": "s=rg;i=%x;b=rg;m=0;t=0;x=0" % (cursor + pos), "__REALTIME_TIMESTAMP": "0",
                 "__MONOTONIC_TIMESTAMP": "0", "_BOOT_ID": "0" * 32}
        entry.update((k, values[k]) for k in fields if k in values)
        out.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
    return 0


def fail(message):
    sys.stderr.write(message + "\n")
    return 2


if __name__ == "__main__":
    tool = os.environ.get("RG_TOOL") or os.path.basename(sys.argv[0])
    sys.exit(journalctl(sys.argv[1:]) if tool == "journalctl" else systemctl(sys.argv[1:]))
