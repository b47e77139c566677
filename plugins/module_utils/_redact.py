# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one place that decides what is a secret and hides it in everything the collection reports.

What is hidden (the value is replaced by ``MASK``; names, flags and quotes stay, so JSON stays JSON):

* the value of a **secret name**, in dicts, in ``name=value`` / ``name: value`` text (environment lines,
  query strings, ``server_args=ServerArgs(api_key='...')`` and ``server_args={'api_key': ...}`` dumps,
  JSON) and as a flag: a name whose last word ends in ``key``/``keys``, ``secret``, ``password``, ``passwd``
  or ``passphrase`` (``api_key``, ``admin_api_key``, ``ssl_keyfile_password``, ``SGLANG_API_KEY``,
  ``--control-plane-api-keys``), or in ``token`` when alone or owned by a credential word (``hf_token``,
  ``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``, ``access_token``), and SGLang's watermark fields. Not secret: ``--ssl-keyfile`` (a path),
  ``--max-total-tokens``, ``--speculative-token-map``, SGLang's ``#new-token: 7`` batch statistics;
* the value of a secret flag also when argparse would accept it abbreviated (``--api-k X``,
  ``--admin-api=X``): ``launch_command`` keeps the flags as typed;
* ``Bearer X`` credentials and Hugging Face token values (``hf_`` and 16 or more letters or digits)
  wherever they stand;
* every known secret passed by the caller, and every secret value found in the same object, wherever it
  appears again (a key seen as ``api_key`` in a dump is also hidden in a later error message), also escaped
  the way a ``repr()`` or a JSON string prints it (``printed_forms``: SGLang logs its ``server_args`` as a
  dict repr, so a key with a tab or a no-break space is printed as ``\\t`` or ``\\xa0``).

Values that cannot be credentials stay readable: ``None``/``null``, empty strings, booleans and numbers in
text (``#token: 250``). Standard library only.
"""

from __future__ import absolute_import, division, print_function

import json
import re

MASK = "********"

# A name is secret when its last word ends in one of these ("token" only when alone or after TOKEN_OWNERS).
SECRET_WORDS = ("key", "keys", "token", "secret", "password", "passwd", "passphrase")
TOKEN_OWNERS = frozenset(("hf", "hub", "access", "auth", "api", "bearer", "refresh", "session", "oauth"))
# Names the word rule misses: SGLang 0.5.23 keeps its watermark key in these (WATERMARK_SECRET_FIELD_NAMES).
SECRET_NAMES = frozenset(("watermark_config", "watermark_key_b"))
# Secret flags of SGLang 0.5.23 and sglang-router 0.3.2: their abbreviations are secret too.
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password", "--hf-token", "--watermark-config",
                "--control-plane-api-keys", "--oracle-password")
# Flags of their own although a secret flag starts with them (argparse takes an exact match first).
PLAIN_FLAGS = frozenset(("--ssl-keyfile",))
# A value found in one place is hidden everywhere else only from this length on (short ones are too common).
MIN_SPREAD = 6
MAX_DEPTH = 64

_NOT_CREDENTIAL_RE = re.compile(r"^(?:none|null|nil|true|false|-?[0-9]+(?:\.[0-9]+)?|\*+|<redacted>|\[redacted\])$", re.I)
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
# --flag=value, --flag value (a value never starts with a dash: argparse would take it for a flag), and the
# flag and its value as items of a list's repr or JSON ('--api-key', 'X')
_FLAG_RE = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)(?:(=)(%s|[^\s\"'\\]*)|([ \t]+|[\"'],[ \t]*)(?!-)(%s|[^\s\"'\\]+))"
                      % (_QUOTED, _QUOTED))
# name=value, name: value, 'name': 'value', "name": "value", #token: 250
_ASSIGN_RE = re.compile(r"(?<![\w-])([A-Za-z_#][\w.#-]*)([\"']?)([ \t]*[=:][ \t]*)(%s|[^\s,;&)}\]\"'<>]+)" % _QUOTED)
_BEARER_RE = re.compile(r"(?<![\w-])([Bb]earer[ \t]+)([A-Za-z0-9._~+/-]+=*)")
_HF_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,}(?![A-Za-z0-9])")
# Text without any of these holds nothing the patterns above match (the fast path for metric labels).
_HINT_RE = re.compile(r"[=:]|--|hf_|earer")


def _words(name):
    return [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]


def is_secret_name(name):
    """True for names of credentials: api_key, admin_api_key, ssl_keyfile_password, HF_TOKEN, --api-key..."""
    if not isinstance(name, str):
        return False
    words = _words(name)
    if not words:
        return False
    if "_".join(words) in SECRET_NAMES:
        return True
    last = words[-1]
    if last.endswith("token"):
        return len(words) == 1 or words[-2] in TOKEN_OWNERS
    return any(last.endswith(word) for word in SECRET_WORDS)


def is_secret_flag(token):
    """True when a command-line word (``--name`` or ``--name=value``) is a secret flag, abbreviated or not."""
    if not isinstance(token, str) or not token.startswith("--"):
        return False
    name = token.split("=", 1)[0]
    if name in PLAIN_FLAGS:
        return False
    if is_secret_name(name):
        return True
    # argparse takes any unambiguous prefix (sglang-router 0.3.2 takes --ap for --api-key)
    return len(name) > 2 and any(flag.startswith(name) for flag in SECRET_FLAGS)


def _looks_like_flag(word):
    return word.startswith("-") and len(word) > 1 and not re.match(r"^-[0-9.]", word)


def _credential(value):
    """The value without its quotes when it could be a credential, else None."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if not value or _NOT_CREDENTIAL_RE.match(value):
        return None
    return value


def _masked(value):
    """MASK in place of value, keeping its quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + MASK + value[0]
    return MASK


def _found_in_text(text):
    found = set(m.group(0) for m in _HF_TOKEN_RE.finditer(text))
    found.update(m.group(2) for m in _BEARER_RE.finditer(text))
    for m in _FLAG_RE.finditer(text):
        value = m.group(3) if m.group(2) else m.group(5)
        if value and is_secret_flag(m.group(1)):
            found.add(_credential(value))
    for m, secret in _assignments(text):
        if secret:
            found.add(_credential(m.group(4)))
    return found


def _assignments(text):
    """(match, is a secret's value) of every ``name=value`` / ``name: value``, also those inside another's value:
    after a name that is not secret the scan goes on at its value (``A: api_key='X'``, ``Environment=HF_TOKEN=X``)."""
    pos = 0
    while True:
        m = _ASSIGN_RE.search(text, pos)
        if m is None:
            return
        secret = is_secret_name(m.group(1)) and _credential(m.group(4)) is not None
        yield m, secret
        pos = m.end() if secret else m.start(4)


def _flag_sub(match):
    flag, eq, inline, space, value = match.groups()
    if eq:
        if is_secret_flag(flag) and inline:
            return flag + "=" + _masked(inline)
        return flag + "=" + _patterns(inline)
    if is_secret_flag(flag) and (space[0] in " \t" or value[0] in "\"'"):
        return flag + space + _masked(value)
    return flag + space + _patterns(value)


def _assign_sub(text):
    out, pos = [], 0
    for m, secret in _assignments(text):
        if secret:
            out.append(text[pos:m.start(4)] + _masked(m.group(4)))
            pos = m.end()
    return "".join(out) + text[pos:]


def _patterns(text):
    if not _HINT_RE.search(text):
        return text
    text = _HF_TOKEN_RE.sub(MASK, text)
    text = _BEARER_RE.sub(lambda m: m.group(1) + MASK, text)
    text = _FLAG_RE.sub(_flag_sub, text)
    return _assign_sub(text)


def printed_forms(secret):
    """Every form a secret takes in printed text: itself, and escaped inside a ``repr()`` or a JSON string (with and
    without ``ensure_ascii``), once or twice over (a repr of a string that holds a repr). The server's launcher
    masks the same forms (roles/sglang_server/files/launch_sglang.py keeps a copy of this function)."""
    forms, last = set([secret]), set([secret])
    for _level in range(2):
        last = set(f for s in last for f in (repr(s)[1:-1], json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]))
        forms.update(last)
    return forms


def _literals(secrets, found=()):
    """Strings to replace wherever they appear, in every printed form, longest first."""
    values = set(s for s in secrets if isinstance(s, str) and s and s != MASK)
    values.update(s for s in found if isinstance(s, str) and len(s) >= MIN_SPREAD and s != MASK)
    return sorted(set(f for s in values for f in printed_forms(s) if f != MASK), key=len, reverse=True)


def _replace(text, literals):
    for secret in literals:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_text(text, secrets=()):
    """A log line, command line or message with every secret it holds (and the given ones) masked."""
    if not isinstance(text, str) or not text:
        return text
    return _patterns(_replace(text, _literals(secrets, _found_in_text(text))))


def _argv_secrets(words):
    """{index: True (value inline) or False (value is the word)} of the words holding a secret flag's value."""
    where = {}
    for i, word in enumerate(words):
        if not is_secret_flag(word):
            continue
        if "=" in word:
            where[i] = True
        elif i + 1 < len(words) and not _looks_like_flag(words[i + 1]):
            where[i + 1] = False
    return where


def redact_argv(argv, secrets=()):
    """A copy of a command line (list of words) with secret flag values and every secret inside a word masked."""
    if not isinstance(argv, (list, tuple)):
        return redact_text(argv, secrets) if isinstance(argv, str) else argv
    words = [w if isinstance(w, str) else str(w) for w in argv]
    where = _argv_secrets(words)
    found = set()
    for i, inline in where.items():
        found.add(words[i].split("=", 1)[1] if inline else words[i])
    for word in words:
        found.update(_found_in_text(word))
    literals = _literals(secrets, found)
    out = []
    for i, word in enumerate(words):
        if i in where and where[i]:
            out.append(word.split("=", 1)[0] + "=" + MASK)
        elif i in where:
            out.append(MASK)
        else:
            out.append(_patterns(_replace(word, literals)))
    return out


def _collect(value, found, depth=0):
    if depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        found.update(_found_in_text(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            if is_secret_name(key) and isinstance(item, str):
                found.add(item)
            _collect(key, found, depth + 1)
            _collect(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        words = list(value)
        if all(isinstance(w, str) for w in words):
            for i, inline in _argv_secrets(words).items():
                found.add(words[i].split("=", 1)[1] if inline else words[i])
        for item in words:
            _collect(item, found, depth + 1)


def _walk(value, literals, depth):
    """value with secrets masked; the very same object when nothing in it changed."""
    if isinstance(value, str):
        new = _patterns(_replace(value, literals))
        return value if new == value else new
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, dict):
        out, changed = {}, False
        for key, item in value.items():
            new_key = _walk(key, literals, depth + 1)
            if is_secret_name(key) and item not in (None, "", False):
                new_item = MASK
            else:
                new_item = _walk(item, literals, depth + 1)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(w, str) for w in value):
            new = redact_argv(value, literals)
        else:
            new = [_walk(item, literals, depth + 1) for item in value]
        if all(a is b or a == b for a, b in zip(new, value)):
            return value
        return new
    return value


def redact(value, secrets=()):
    """A copy of any JSON-like value (dicts, lists, strings) with every secret masked.

    Dict keys that name a secret get MASK as their value, strings go through ``redact_text``, lists of
    strings through ``redact_argv``; known ``secrets`` and every secret value found anywhere in ``value`` are
    masked wherever they appear. Returns ``value`` itself when nothing needed masking.
    """
    found = set()
    _collect(value, found)
    return _walk(value, _literals(secrets, found), 0)
