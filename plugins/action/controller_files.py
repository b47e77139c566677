# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin of llmops.sglang.controller_files: the files are written by the controller's own process, so a report
costs no module run on the controller (plugins/plugin_utils/_controller_files.py decides and writes)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.plugin_utils._controller_files import ControllerFilesError, save


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC = {"dir": {"type": "path", "required": True}, "files": {"type": "dict", "required": True},
                     "mode": {"type": "raw", "default": "0644"}}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        try:
            result.update(save(args["dir"], args["files"], args["mode"], check=self._task.check_mode))
        except ControllerFilesError as exc:
            result.update(failed=True, msg=str(exc))
        return result
