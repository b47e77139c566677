# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: markdown
short_description: Text from a log or a server, escaped to stay text in a Markdown report
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Shows control characters (ANSI escapes included), bidi controls and line separators as visible escapes
    (V(\\x1b), V(\\u202e), V(\\n)), then escapes what Markdown would read as syntax, so a value never leaves its table
    cell, paragraph, code span or code block, and never becomes a link, an HTML tag or a heading.
  - The reports C(audit.md) and the benchmark's C(report.md) write every value from a log or a server through it.
positional: _input, kind
options:
  _input:
    description: The text (any value is made a string).
    type: raw
    required: true
  kind:
    description:
      - V(text) for a paragraph, list item or table cell; V(code) for an inline code span (not in a table cell, where
        GitHub reads a pipe inside a code span as the cell's end); V(block) for a fenced code block (its fences included).
    type: str
    choices: [text, code, block]
    default: text
"""

EXAMPLES = r"""
- name: One finding as a table row of a report
  ansible.builtin.debug:
    msg: "| {{ finding.rule | llmops.sglang.markdown }} | {{ finding.text | llmops.sglang.markdown }} |"
"""

RETURN = r"""
_value:
  description: The escaped Markdown.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.plugin_utils._report_text import markdown as _markdown


def markdown(text, kind="text"):
    try:
        return _markdown(text, kind)
    except ValueError as exc:
        raise AnsibleFilterError("llmops.sglang.markdown: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"markdown": markdown}
