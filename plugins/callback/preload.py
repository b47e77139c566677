# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: preload
type: aggregate
short_description: Load the collection's filters and action plugins once, before Ansible forks its workers
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Ansible runs every task on every host in a worker process forked from C(ansible-playbook). A worker that templates
    an expression naming one of this collection's filters imports that filter, and the Python it uses, from source;
    the collection loader compiles it each time and keeps no bytecode, and the worker's imports die with it.
  - This callback imports the collection's filter and action plugins into C(ansible-playbook) itself when the playbook
    starts, so every worker is forked with them already loaded. It prints nothing and changes no result.
  - On a no-change run of the collection's C(site.yml) that compiling was a quarter of the controller's CPU time.
  - Enabled by the repository's C(ansible.cfg) (C(callbacks_enabled)); enable it the same way in an execution
    environment or an AWX project that has its own configuration.
requirements:
  - Enable it, for example C(callbacks_enabled = llmops.sglang.preload) in C(ansible.cfg).
"""

import pathlib
import time

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader
from ansible.utils.display import Display

display = Display()
PLUGINS = pathlib.Path(__file__).resolve().parent.parent
COLLECTION = "llmops.sglang."


def preload():
    """Load every filter and action plugin of the collection in this process; returns (names loaded, names that
    failed)."""
    loaded, failed = [], []
    for loader, folder in ((filter_loader, "filter"), (action_loader, "action")):
        for path in sorted((PLUGINS / folder).glob("[!_]*.py")):
            try:
                found = loader.get(COLLECTION + path.stem, class_only=True) if loader is action_loader else \
                    filter_loader.get(COLLECTION + path.stem)
            except Exception:  # pylint: disable=broad-exception-caught
                found = None
            (loaded if found is not None else failed).append(COLLECTION + path.stem)
    return loaded, failed


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "llmops.sglang.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        start = time.monotonic()
        loaded, failed = preload()
        display.vvv("llmops.sglang.preload: %d plugins loaded ahead of the workers in %.2f s" % (len(loaded), time.monotonic() - start))
        if failed:
            # Only speed is lost: a worker then loads the plugin itself, and reports its real error if it has one.
            display.vvv("llmops.sglang.preload: not loaded ahead: %s" % ", ".join(failed))
