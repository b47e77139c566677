# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: worker_url
short_description: The URL at which routers reach an SGLang server
version_added: 0.1.0
author:
  - llmops maintainers (@llmops)
description:
  - Builds C(SCHEME://HOST:PORT) from the server's bind address. A wildcard bind address (V(0.0.0.0), V(::) or
    empty) says where the server listens, not where it is reached, so the fallback (the host's C(ansible_host))
    is used then. IPv6 addresses are bracketed.
  - The router role writes these URLs to the router's C(--worker-urls), and the server role finds itself in a
    router's worker list by the same URL; one function keeps the two equal.
positional: _input, port, fallback
options:
  _input:
    description: The server's bind address (C(sglang_server_host)).
    type: str
    required: true
  port:
    description: The server's port.
    type: int
    required: true
  fallback:
    description: The address used for a wildcard bind address (C(ansible_host), else the inventory name).
    type: str
    required: true
  scheme:
    description: V(http) or V(https).
    type: str
    default: http
"""

EXAMPLES = r"""
- name: Where routers reach this server
  ansible.builtin.debug:
    msg: "{{ sglang_server_host | llmops.sglang.worker_url(sglang_server_port, ansible_host | default(inventory_hostname)) }}"
"""

RETURN = r"""
_value:
  description: The URL, for example V(http://10.0.0.11:30000) or V(http://[fd00::11]:30000).
  type: str
"""

from ansible_collections.llmops.sglang.plugins.module_utils._http import worker_url


class FilterModule(object):
    def filters(self):
        return {"worker_url": worker_url}
