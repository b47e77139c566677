# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment(object):

    # Options of the modules that send requests to the SGLang server (the HTTP client in module_utils/_server_info.py).
    DOCUMENTATION = r"""
options:
  api_key:
    description:
      - The server's C(--api-key), sent as a bearer token.
    type: str
  validate_certs:
    description:
      - Verify the server's TLS certificate for C(https://) URLs.
    type: bool
    default: true
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
