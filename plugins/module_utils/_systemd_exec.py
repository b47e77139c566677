# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ExecStart= command lines as systemd reads them, written and read in this one place.

Writing: ``quote(word)`` and ``command_line(words)`` give words that systemd hands to the program unchanged
(``%`` and ``$`` doubled, ``\\`` and ``"`` escaped, quoted unless plain); a word systemd cannot carry (NUL, a line
break) is refused. Reading: ``unit_commands(text)`` takes ``systemctl cat UNIT`` (the unit file and its drop-ins) and
returns every ExecStart= command split the way systemd 252 does (systemd.service(5) "Command lines", systemd.syntax(7)):

* the unit file: ``[Service]`` section, ``#``/``;`` comment lines, a line ending in an unescaped backslash continues
  on the next (the backslash becomes a space, comment lines inside are skipped), an empty ``ExecStart=`` drops the
  commands before it;
* prefixes ``@ - : + ! !!`` before the executable;
* specifiers first, over the whole value (``%%`` is ``%``, ``%n %N %p %i`` from the unit's name; any other is
  refused: write its value);
* words: whitespace separates, ``"..."`` and ``'...'`` quote (also in the middle of a word), backslash escapes as in C
  inside quotes or not (``\\n \\t \\xHH \\ooo \\uXXXX``, ``\\s`` a space; one systemd cannot read stays verbatim, as
  systemd keeps it after a warning), a bare ``;`` word ends one command (a bare ``\\;`` or a quoted ``";"`` is ``;``);
* at start, ``${NAME}`` in a word and a whole-word ``$NAME`` take the environment's value, ``$$`` is ``$``: the
  command's ``shown`` words keep them as ``systemctl show`` prints them, ``argv`` has ``$$`` made ``$``, and
  ``variables`` lists the words whose value only systemd knows.

Pure Python, standard library only; runs on the controller (the server role's plan) and on hosts (kv_cache_guard).
"""

from __future__ import annotations

import re

PREFIXES = "@-:+!"
# Words that need no quotes: nothing systemd reads specially.
_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_./:,=+@-]+$")
_REFUSED = ("\x00", "\n", "\r")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"',
                   "'": "'", "s": " "}
_WHITESPACE = " \t\n\r"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# One /proc/PID/cmdline: Linux's ARG_MAX is 2 MiB by default (a quarter of an 8 MiB stack).
MAX_CMDLINE = 4 << 20


class ExecSyntaxError(ValueError):
    """A command line systemd would refuse, or a word it cannot carry; the message names the cause and the fix."""


# ---------------------------------------------------------------------------------------------
# Writing


def quote(word, first=False):
    """One word of an ExecStart= line that systemd passes on exactly as ``word``.

    ``first``: the executable, quoted also when it starts with a prefix character (systemd would read it as one).
    """
    text = _carried(word, "an ExecStart= line").replace("%", "%%").replace("$", "$$")
    if _PLAIN_WORD.match(text) and not (first and text[0] in PREFIXES):
        return text
    return _quoted(text)


def environment_value(name, value):
    """Environment='s value for one variable, NAME=VALUE as one double-quoted word that systemd reads back as exactly
    that: the same quoting as an ExecStart= word, but ``$`` stays single (systemd fills in no variables there)."""
    return _quoted(_carried("%s=%s" % (name, value), "an Environment= line").replace("%", "%%"))


def _carried(word, where):
    """The word as text; ExecSyntaxError when it holds what no unit line can carry."""
    text = str(word)
    bad = [c for c in _REFUSED if c in text]
    if bad:
        raise ExecSyntaxError("the word %r holds %s, which %s cannot carry: remove it"
                              % (text[:80], " and ".join({"\x00": "a NUL byte", "\n": "a line break", "\r": "a carriage return"}[c]
                                                         for c in bad), where))
    return text


def _quoted(text):
    """text in double quotes, backslash and quote escaped, control characters as \\xHH (systemd C-unescapes them)."""
    out = []
    for char in text:
        if char in '\\"':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7f:
            out.append("\\x%02x" % ord(char))
        else:
            out.append(char)
    return '"%s"' % "".join(out)


def command_line(words, breaks=()):
    """ExecStart='s value for words, a continued line (backslash, newline, four spaces) before each index in breaks."""
    lines, line = [], []
    for index, word in enumerate(words):
        if line and index in breaks:
            lines.append(" ".join(line))
            line = []
        line.append(quote(word, first=index == 0))
    lines.append(" ".join(line))
    return " \\\n    ".join(lines)


# ---------------------------------------------------------------------------------------------
# Reading one ExecStart= value


def _unit_specifiers(unit):
    """The specifiers of a unit's name that systemd resolves (%n full name, %N without suffix, %p prefix, %i instance)."""
    if not unit:
        return {}
    name = unit.rsplit(".", 1)[0] if "." in unit else unit
    prefix, _at, instance = name.partition("@")
    return {"n": unit, "N": name, "p": prefix, "i": instance}


def _specifiers(value, unit=None):
    """The value after systemd's specifier pass over the whole line: %% is %, the unit name's specifiers are resolved
    when the unit is known, any other is refused (its value is the host's or the unit's at load time)."""
    known, out, i = _unit_specifiers(unit), [], 0
    while i < len(value):
        char = value[i]
        if char == "%":
            nxt = value[i + 1:i + 2]
            if nxt == "%":
                out.append("%")
            elif nxt in known:
                out.append(known[nxt])
            else:
                raise ExecSyntaxError("ExecStart= uses the specifier %%%s, which only systemd resolves: write its value in "
                                      "the unit (or %%%% for a literal %%)" % (nxt or " at the end"))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _escape(text, i):
    """(text, next index) of the C escape at text[i] (the backslash), as systemd's cunescape_one; one it cannot read
    (unknown, short, NUL, out of range, a lone trailing backslash) it keeps verbatim, backslash included, as systemd
    252 does after warning "Ignoring unknown escape sequences"."""
    nxt = text[i + 1:i + 2]
    if nxt == "":
        return "\\", i + 1
    if nxt in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[nxt], i + 2
    for lead, digits, limit in (("x", 2, 0xFF), ("u", 4, 0xFFFF), ("U", 8, 0x10FFFF)):
        code = text[i + 2:i + 2 + digits]
        if nxt == lead and len(code) == digits and all(c in "0123456789abcdefABCDEF" for c in code):
            number = int(code, 16)
            if 0 < number <= limit and not 0xD800 <= number <= 0xDFFF:
                return _byte(number) if lead == "x" else chr(number), i + 2 + digits
    code = text[i + 1:i + 4]
    if len(code) == 3 and all(c in "01234567" for c in code) and 0 < int(code, 8) <= 0xFF:
        return _byte(int(code, 8)), i + 4
    return "\\" + nxt, i + 2


def _byte(number):
    """One byte as systemd puts it in the argument: above 0x7f a lone byte, which reads back (surrogateescape) as this."""
    return chr(number) if number < 0x80 else chr(0xDC00 + number)


def _words(text):
    """systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) over text: [(word, raw text)]."""
    words, i, n = [], 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            return words
        start, out, quote_char = i, [], None
        while i < n:
            char = text[i]
            if quote_char is None and char in _WHITESPACE:
                break
            if char == "\\":
                got, i = _escape(text, i)
                out.append(got)
            elif quote_char is None and char in "\"'":
                quote_char = char
                i += 1
            elif char == quote_char:
                quote_char = None
                i += 1
            else:
                out.append(char)
                i += 1
        if quote_char is not None:
            raise ExecSyntaxError("ExecStart= has an unbalanced %s quote: close it" % quote_char)
        words.append(("".join(out), text[start:i]))


def _exec_word(word):
    """(word as the program gets it, whether systemd fills in a variable there) after systemd's environment pass."""
    if word.startswith("$") and _ENV_NAME.match(word[1:]):
        return word, True
    out, i, variable = [], 0, False
    while i < len(word):
        if word.startswith("$$", i):
            out.append("$")
            i += 2
        elif word.startswith("${", i) and "}" in word[i:]:
            end = word.index("}", i)
            out.append(word[i:end + 1])
            variable = True
            i = end + 1
        else:
            out.append(word[i])
            i += 1
    return "".join(out), variable


def split_words(text):
    """The words of a command line given as one string, by ExecStart='s word rules (quotes, C escapes) without its
    specifier and environment passes: ExecSyntaxError when a quote is left open."""
    return [word for word, _raw in _words(text)]


def parse_value(value, unit=None):
    """The commands of one ExecStart= value (joined lines), each {prefixes, path, argv, shown, variables}.

    ``path`` is the executable, ``argv`` what the program gets (``@``: its argv[0] is the second word), ``shown``
    systemctl show's argv[] (before the environment pass), ``variables`` the argv indices systemd fills in at start
    (their text there is the reference, not the value).
    """
    tokens = _words(_specifiers(value, unit))
    groups, group = [], []
    for word, raw in tokens:
        word = ";" if raw == "\\;" else word  # systemd's own rule for the bare word \;
        if raw == ";":  # a bare ';' word separates commands
            groups.append(group)
            group = []
        else:
            group.append((word, raw))
    groups.append(group)
    return [_command(group) for group in groups if group or len(groups) == 1]


def _command(group):
    prefixes = ""
    if group:
        raw = group[0][1]
        prefixes = raw[:len(raw) - len(raw.lstrip(PREFIXES))]
        rest = raw[len(prefixes):]
        group = ([(_words(rest)[0][0], rest)] if rest else []) + group[1:]
    words = [word for word, _raw in group]
    if not words:
        raise ExecSyntaxError("ExecStart= has %s without a command: name the executable" % (
            "the prefixes " + prefixes if prefixes else "an empty command"))
    if "@" in prefixes and len(words) < 2:
        raise ExecSyntaxError("ExecStart= with the prefix @ needs argv[0] after the executable")
    shown = words[1:] if "@" in prefixes else words
    argv, variables = [], []
    for index, word in enumerate(shown):
        got, variable = _exec_word(word)
        argv.append(got)
        if variable:
            variables.append(index)
    return {"prefixes": prefixes, "path": words[0], "argv": argv, "shown": shown, "variables": variables}


# ---------------------------------------------------------------------------------------------
# Reading a unit


def unit_lines(text):
    """(section, key, value) of a unit file's assignments, lines joined as systemd joins continued lines."""
    section, pending, out = None, None, []
    # systemd ends a line at \n, \r or NUL only (not at Unicode line separators) and strips only ASCII blanks
    for raw in re.split(r"\r\n|[\n\r\x00]", text):
        line = raw.strip(_WHITESPACE)
        if pending is not None and line[:1] in ("#", ";"):
            continue  # a comment inside a continued line is skipped
        if pending is not None:
            line = pending + line
            pending = None
        elif not line or line[:1] in ("#", ";"):
            continue
        if _continues(line):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if sep:
            out.append((section, key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    if pending is not None:
        key, sep, value = pending.partition("=")
        if sep:
            out.append((section, key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    return out


def _continues(line):
    """Whether the line ends in a backslash that is not itself escaped."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def unit_commands(text, unit=None):
    """Every ExecStart= command of ``systemctl cat UNIT`` (fragment then drop-ins), as parse_value gives them."""
    commands = []
    for section, key, value in unit_lines(text):
        if section == "Service" and key == "ExecStart":
            commands = [] if value == "" else commands + parse_value(value, unit)
    return commands


_SHOWN_RE = re.compile(r"argv\[\]=(.*?) ; (?:ignore_errors|flags)=", re.S)


def shown_commands(text):
    """The argv[] of each command of ``systemctl show -p ExecStart``: systemd joins the words with single spaces and no
    quoting, so this is only good to compare against (" ".join of a command's ``shown``), never to split."""
    return list(_SHOWN_RE.findall(text or ""))


def read_cmdline(pid, proc="/proc"):
    """The argv of a running process from /proc/PID/cmdline (NUL-separated, read up to MAX_CMDLINE), or None when it
    cannot be read (gone, or hidden by the proc mount's hidepid)."""
    try:
        with open("%s/%d/cmdline" % (proc, int(pid)), "rb") as handle:
            data = handle.read(MAX_CMDLINE + 1)
    except (OSError, ValueError):
        return None
    if not data or len(data) > MAX_CMDLINE:
        return None
    data = data[:-1] if data.endswith(b"\x00") else data
    return [word.decode("utf-8", "surrogateescape") for word in data.split(b"\x00")]


def loaded_differs(commands, shown):
    """Why the unit file's commands (unit_commands of systemctl cat) are not what systemd has loaded (shown_commands
    of systemctl show), or None when every command's words, joined as systemctl joins them, are the same."""
    mine = [" ".join(command["shown"]) for command in commands]
    if mine == list(shown):
        return None
    return ("the unit file on disk (%d command(s)) is not what systemd has loaded (%d): it changed without "
            "systemctl daemon-reload; reload and restart the unit" % (len(mine), len(shown)))


def process_differs(command, cmdline):
    """Why a running process's argv (read_cmdline) is not this command's, or None when it is: words systemd fills in
    from the environment (``variables``; a whole-word $NAME may become any number of words) match anything."""
    argv, variables = command["argv"], command["variables"]
    if not variables:
        same = argv == cmdline
    else:
        head, tail = argv[:variables[0]], argv[variables[-1] + 1:]
        same = (len(cmdline) >= len(head) + len(tail) and cmdline[:len(head)] == head
                and cmdline[len(cmdline) - len(tail):] == tail)
    if same:
        return None
    first = next((i for i, (a, b) in enumerate(zip(argv, cmdline)) if a != b), min(len(argv), len(cmdline)))
    # positions only: a word may be a secret someone wrote into the unit
    return ("the running process was started with another command than the unit's (%d words, the unit has %d; they "
            "differ from word %d on): the unit changed after the start; restart it" % (len(cmdline), len(argv), first))
