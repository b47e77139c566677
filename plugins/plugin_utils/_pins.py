# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Which requirements a Python environment does not meet yet, by pip's own rules (PEP 440 and PEP 503 through
``packaging``): names compare case-insensitively with runs of ``-_.`` as one ``-``; ``==2.11.0`` is met by
``2.11.0+cu130`` (a pin without a local label ignores the installed one's), ``==2.11.0+cu130`` only by exactly
that; ranges such as ``cmake>=3.31`` are checked too. Runs on the controller (ansible-core requires packaging).
"""

from __future__ import annotations

import re

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version
except ImportError:  # ansible-core requires packaging; a bare interpreter may lack it
    Requirement = None


class PinError(ValueError):
    """A requirement that is not one; the message names it and the form to write."""


def canonical_name(name):
    """PEP 503: ``Torch_Vision`` -> ``torch-vision``."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def _requirement(item):
    """A requirement string, or a {name, version} pin as the roles' package lists hold."""
    if Requirement is None:
        raise PinError("the Python package 'packaging' is missing on the controller: install ansible-core with pip, "
                       "which brings it")
    text = item
    if isinstance(item, dict):
        if not item.get("name"):
            raise PinError("package %r has no name: write {name: torch, version: 2.11.0}" % (item,))
        text = str(item["name"]) if item.get("version") in (None, "") else "%s==%s" % (item["name"], item["version"])
    try:
        return Requirement(str(text))
    except InvalidRequirement as exc:
        raise PinError("requirement %r is not one pip reads (%s): write NAME, NAME==VERSION or NAME>=VERSION"
                       % (text, exc))


def installed_versions(installed):
    """{canonical name: version} from ``pip list --format=json`` ([{name, version}]) or a {name: version|None}
    mapping (None: not installed)."""
    if isinstance(installed, dict):
        pairs = installed.items()
    else:
        pairs = ((p.get("name"), p.get("version")) for p in installed or [] if isinstance(p, dict))
    return {canonical_name(n): str(v) for n, v in pairs if n and v is not None}


def is_met(requirement, installed):
    """Whether one requirement is met by ``installed`` (as ``installed_versions`` returns)."""
    req = _requirement(requirement)
    have = installed.get(canonical_name(req.name))
    if have is None:
        return False
    if not req.specifier:
        return True
    try:
        Version(have)
    except InvalidVersion:
        return False
    return req.specifier.contains(have, prereleases=True)


def index_options(wheelhouse=None, index_url=None, extra_index_urls=()):
    """pip's package source options: a wheelhouse means no index at all (``--no-index --find-links=DIR``); else the
    index and extra indexes given; neither is pip's default index."""
    if wheelhouse:
        return ["--no-index", "--find-links=%s" % wheelhouse]
    return (["--index-url=%s" % index_url] if index_url else []) + ["--extra-index-url=%s" % url for url in extra_index_urls or []]


def unmet(requirements, installed):
    """The requirements (in their given form) that ``installed`` does not meet, in order."""
    have = installed_versions(installed)
    return [r for r in requirements or [] if not is_met(r, have)]
