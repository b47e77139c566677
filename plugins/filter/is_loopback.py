# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: is_loopback
short_description: Whether an address is reachable from its own host only
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - True for V(127.0.0.0/8), V(::1) (also bracketed or IPv4-mapped) and V(localhost); false for a wildcard bind
    address (V(0.0.0.0), V(::)), host names and every other address.
  - The server and router roles refuse a keyless bind that is not loopback, and the router role refuses workers
    that listen on loopback on other hosts, by this one rule.
positional: _input
options:
  _input:
    description: A bind address or URL host.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a keyless server that the network can reach
  ansible.builtin.assert:
    that: sglang_server_host | llmops.sglang.is_loopback or sglang_server_api_key
"""

RETURN = r"""
_value:
  description: Whether the address is loopback.
  type: bool
"""

from ansible_collections.llmops.sglang.plugins.module_utils._http import is_loopback


class FilterModule(object):
    def filters(self):
        return {"is_loopback": is_loopback}
