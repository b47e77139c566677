# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: local_url
short_description: The URL at which a check on the server's own host reaches it
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Builds C(SCHEME://HOST:PORT) from a bind address for a client on the same host. A wildcard bind address is
    probed on the loopback address of its family (V(0.0.0.0) or empty gives V(127.0.0.1), V(::) gives V([::1])),
    V(localhost) on V(127.0.0.1); any other address is used as it is. IPv6 addresses are bracketed, so an IPv6
    bind such as V(fd00::11) gives V(http://[fd00::11]:30000), never the invalid V(http://fd00::11:30000).
  - The roles and playbooks build every URL of a server or router on its own host with this filter.
positional: _input, port
options:
  _input:
    description: The bind address (C(sglang_server_host), C(router_host), ...).
    type: str
    required: true
  port:
    description: The port.
    type: int
    required: true
  scheme:
    description: V(http) or V(https).
    type: str
    default: http
"""

EXAMPLES = r"""
- name: Where the audit reaches the server on this host
  ansible.builtin.debug:
    msg: "{{ sglang_server_host | llmops.sglang.local_url(sglang_server_port) }}"
"""

RETURN = r"""
_value:
  description: The URL, for example V(http://127.0.0.1:30000) or V(http://[fd00::11]:30000).
  type: str
"""

from ansible_collections.llmops.sglang.plugins.module_utils._http import local_url


class FilterModule(object):
    def filters(self):
        return {"local_url": local_url}
