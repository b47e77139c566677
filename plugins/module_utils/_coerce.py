# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Values that arrive as text or loosely typed (role settings, templated results, systemd properties) as numbers
and booleans, by one set of rules for the whole collection.

None of these raise: each answers None (or the caller's default) for what it cannot read, and the caller raises its
own error naming the setting and the fix. Booleans are Ansible's words (``ansible.module_utils.parsing.convert_bool``:
yes/no, on/off, true/false, y/n, t/f, 1/0 in any case), so a value means here what it means in a playbook.

Standard library only; runs on hosts (modules) and on the controller (the roles' plans).
"""

from __future__ import annotations

import math

TRUE_WORDS = frozenset(("y", "yes", "on", "1", "true", "t"))
FALSE_WORDS = frozenset(("n", "no", "off", "0", "false", "f"))
# What a template gives for an unset value
EMPTY_WORDS = frozenset(("", "none", "null"))


def boolean_or_none(value):
    """True or False for a bool, 1/0 or one of Ansible's boolean words (any case, blanks ignored); None otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in TRUE_WORDS else (False if word in FALSE_WORDS else None)
    if isinstance(value, (int, float)):
        return True if value == 1 else (False if value == 0 else None)
    return None


def truthy(value):
    """Ansible's ``boolean(value, strict=False)``: true only for a true word (see boolean_or_none), else false."""
    return boolean_or_none(value) is True


def is_empty(value):
    """None, or text a template gives for an unset value ('', 'None', 'null')."""
    return value is None or (isinstance(value, str) and value.strip().lower() in EMPTY_WORDS)


def dtype_name(value):
    """A dtype name as SGLang and torch spell it, for comparing: stripped, lower case, without ``torch.``
    (``' torch.BFloat16'`` is ``bfloat16``); None for a value that is not text or is empty. Known or not is the
    caller's question."""
    if not isinstance(value, str):
        return None
    name = value.strip().lower()
    if name.startswith("torch."):
        name = name[len("torch."):]
    return name or None


def to_int(value, default=None):
    """Python's ``int(value)`` (an int, a float cut toward zero, a string of digits), else default."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def jinja_int(value):
    """Jinja's ``int`` filter: ``int(value)``, else ``int(float(value))`` ("42.7" is 42), else 0."""
    number = to_int(value)
    if number is None:
        number = to_int(to_float(value, None), 0)
    return number


def to_float(value, default=0.0):
    """``float(value)``, else default."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return default


def whole_number(value, digits=False, minimum=None):
    """An int for an int or a float with no fraction (JSON's 8.0), never for a bool; with ``digits`` also for a string of
    digits (a systemd property); None otherwise, and below ``minimum``."""
    number = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif digits and isinstance(value, str) and value.strip().isdecimal():
        number = int(value.strip())
    return None if number is None or (minimum is not None and number < minimum) else number
