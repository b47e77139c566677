# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # Options of the modules that send requests to the SGLang server (the HTTP client in module_utils/_http.py).
    DOCUMENTATION = r"""
options:
  api_key:
    description:
      - The server's C(--api-key), sent as a bearer token.
    type: str
"""

    # TLS of every module that sends requests (module_utils/_http.py, TLS_ARGUMENT_SPEC): Ansible's own URL layer
    # (ansible.module_utils.urls) builds the TLS context, the collection's client keeps every read bounded.
    TLS = r"""
options:
  validate_certs:
    description:
      - Verify the server's TLS certificate for C(https://) URLs (against O(ca_path) when set, else the host's CAs).
    type: bool
    default: true
  ca_path:
    description:
      - PEM file of the CA (or CAs) that signed the server's certificate, for a server whose certificate comes from a
        private CA. Set, only these CAs are trusted for the request.
    type: path
  client_cert:
    description:
      - PEM file of the client certificate presented to a server (or a proxy in front of it) that requires one
        (mutual TLS). It may also hold the private key, then O(client_key) stays unset.
    type: path
  client_key:
    description:
      - PEM file of the unencrypted private key of O(client_cert). The file must not be readable by every user
        (mode 0600 or 0640), else the module fails before any request; its contents are never logged.
    type: path
"""

    # For modules that let the client use the environment's proxy.
    PROXY = r"""
options:
  use_proxy:
    description:
      - Use the proxy from the environment (loopback URLs never do).
    type: bool
    default: true
"""
