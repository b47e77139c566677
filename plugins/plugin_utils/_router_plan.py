# -*- coding: utf-8 -*-
# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Private to this collection's roles and plugins: runs on the controller only, not an API; it may change in
# any release without notice.
"""Everything the router role derives from its settings (the ``router_*`` variables): the worker URLs, the
router's command line and systemd ExecStart, the pip command, the URLs its checks use on the router host, and
the settings it refuses (with the cause and the fix). The role's tasks only call ``plan`` and use the result.

URLs and loopback follow the collection's one rule (``_http``). Runs on the controller, standard library only.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.llmops.sglang.plugins.module_utils._files import unsynced
from ansible_collections.llmops.sglang.plugins.module_utils._http import OptionError, check_api_key, is_loopback, local_url, worker_url
from ansible_collections.llmops.sglang.plugins.plugin_utils._pins import index_options
from ansible_collections.llmops.sglang.plugins.module_utils._redact import is_secret_flag
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import verify_command
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import ExecSyntaxError, command_line
from ansible_collections.llmops.sglang.plugins.module_utils._coerce import to_int as _int

POLICIES = ("random", "round_robin", "cache_aware", "power_of_two", "manual")
PIP_SOURCES = ("index", "wheelhouse")
VERSION = re.compile(r"^[0-9][0-9A-Za-z.!+_-]*$")
# The key goes into an EnvironmentFile between double quotes, where systemd would unquote or expand these.
KEY_FORBIDDEN = re.compile(r"[\s\"'\\$`]")
PIP_QUIET = ["--disable-pip-version-check", "--no-input", "--progress-bar=off"]
# Router flag <- setting, in the order of the command line (its order is the unit's: keep it).
FLAGS = (
    ("--policy", "router_policy"),
    ("--cache-threshold", "router_cache_threshold"),
    ("--balance-abs-threshold", "router_balance_abs_threshold"),
    ("--balance-rel-threshold", "router_balance_rel_threshold"),
    ("--request-timeout-secs", "router_request_timeout_secs"),
    ("--max-concurrent-requests", "router_max_concurrent_requests"),
    ("--queue-size", "router_queue_size"),
    ("--queue-timeout-secs", "router_queue_timeout_secs"),
    ("--retry-max-retries", "router_retry_max_retries"),
    ("--worker-startup-timeout-secs", "router_worker_startup_timeout_secs"),
    ("--worker-startup-check-interval", "router_worker_startup_check_interval"),
    ("--health-check-endpoint", "router_health_check_endpoint"),
    ("--health-check-interval-secs", "router_health_check_interval_secs"),
    ("--health-check-timeout-secs", "router_health_check_timeout_secs"),
    ("--health-failure-threshold", "router_health_failure_threshold"),
    ("--health-success-threshold", "router_health_success_threshold"),
    ("--prometheus-host", "router_prometheus_host"),
    ("--prometheus-port", "router_prometheus_port"),
    ("--log-level", "router_log_level"),
)


class PlanError(ValueError):
    """A setting the plan cannot be made from; the message names it."""


def _text(value):
    """A value as it goes on a command line (what Jinja's ``string`` filter gives)."""
    return value if isinstance(value, str) else str(value)


# Every setting the plan reads: these, FLAGS' and the optional ones (null or empty when not wanted). The role's
# vars/main.yml hands exactly these over (_router_setting_names; a unit test keeps the two equal).
NEEDED = ("router_version", "router_venv", "router_config_dir", "router_service_name", "router_host", "router_port",
          "router_worker_group", "router_worker_scheme", "router_worker_port", "router_pip_source", "router_pip_wheelhouse")
OPTIONAL = ("router_pip_index_url", "router_pip_wheelhouse_src", "router_pip_extra_args", "router_worker_urls_extra",
            "router_extra_args", "router_api_key", "router_no_api_key_waiver")
SETTINGS = NEEDED + tuple(name for _flag, name in FLAGS) + OPTIONAL


def _check_given(settings):
    if not isinstance(settings, dict):
        raise PlanError("the router settings must be a mapping of _router_setting_names, not %s" % type(settings).__name__)
    missing = [n for n in SETTINGS if n not in settings]
    if missing:
        raise PlanError("%s not set (each has a default in the router role's defaults/main.yml): pass every name of the "
                        "role's _router_setting_names" % ", ".join(missing))


def _empty(value):
    return value is None or value == ""


def _var(hostvars, host, name):
    value = hostvars[host].get(name)
    return None if _empty(value) else value


def worker_urls(settings, hosts, hostvars):
    """One URL per host of the worker group, then router_worker_urls_extra, each once, in that order."""
    urls = []
    for h in hosts:
        port = _var(hostvars, h, "sglang_server_port") or settings["router_worker_port"]
        url = worker_url(_var(hostvars, h, "sglang_server_host") or "", port, _var(hostvars, h, "ansible_host") or h,
                         settings["router_worker_scheme"])
        urls.append(url)
    urls += [_text(u) for u in settings.get("router_worker_urls_extra") or []]
    return list(dict.fromkeys(urls))


def loopback_workers(hosts, hostvars, me):
    """The workers on other hosts that listen on loopback only: no router elsewhere reaches them."""
    return [h for h in hosts if h != me and is_loopback(_var(hostvars, h, "sglang_server_host") or "")]


def cli_args(settings, workers):
    """The router's arguments (the launcher adds the API key from the environment)."""
    args = ["--host", _text(settings["router_host"]), "--port", _text(settings["router_port"]), "--worker-urls"] + workers
    for flag, name in FLAGS:
        args += [flag, _text(settings[name])]
    return args + [_text(a) for a in settings.get("router_extra_args") or []]


def pip_install(settings):
    """The argv that installs the pinned release into the venv, with the options of the configured source
    (a wheelhouse means no index at all)."""
    if settings["router_pip_source"] == "wheelhouse":
        source = index_options(wheelhouse=_text(settings["router_pip_wheelhouse"]))
    else:
        index = settings.get("router_pip_index_url")
        source = index_options(index_url=None if _empty(index) else _text(index))
    return ([_text(settings["router_venv"]) + "/bin/python", "-m", "pip", "install"] + PIP_QUIET + source
            + [_text(a) for a in settings.get("router_pip_extra_args") or []]
            + ["sglang-router==" + _text(settings["router_version"])])


def exec_start(argv):
    """systemd's ExecStart value for argv (_systemd_exec's quoting, so systemd keeps every word literal), a word a line."""
    return command_line([_text(a) for a in argv], breaks=range(1, len(argv)))


def _settings_problem(s):
    bad = (not isinstance(s["router_version"], str) or not VERSION.match(s["router_version"])
           or s["router_pip_source"] not in PIP_SOURCES
           or (s["router_pip_source"] != "wheelhouse" and not _empty(s.get("router_pip_wheelhouse_src")))
           or s["router_policy"] not in POLICIES
           or _int(s["router_port"]) == _int(s["router_prometheus_port"])
           or isinstance(s.get("router_extra_args"), str))
    if not bad:
        return None
    return ("Bad router settings: router_version must be a quoted exact release (not %s), router_pip_source \"index\" or "
            "\"wheelhouse\" (a wheelhouse source also for router_pip_wheelhouse_src), router_policy one of %s (not %s), "
            "router_port and router_prometheus_port different (%s, %s) and router_extra_args a list."
            % (s["router_version"], ", ".join(POLICIES), s["router_policy"], s["router_port"], s["router_prometheus_port"]))


def problems(settings, workers, loopback, me):
    """Why the role must not go on, each with its fix; [] when it may. The API key is never quoted."""
    s = settings
    found = [_settings_problem(s)]
    key = s.get("router_api_key")
    waiver = s.get("router_no_api_key_waiver")
    if not (is_loopback(s["router_host"]) or not _empty(key) or (isinstance(waiver, str) and waiver.strip())):
        found.append(
            "router_host is %s (reachable from other machines) but no router_api_key is set: anyone on the network could "
            "use the model through the router, also servers that listen on loopback without a key. Set an API key "
            "(router_api_key, which defaults to sglang_server_api_key), bind to 127.0.0.1, or set "
            "router_no_api_key_waiver to the reason." % s["router_host"])
    if not workers:
        found.append("No worker URL: the inventory group %s (router_worker_group) has no host and router_worker_urls_extra "
                     "is empty. Add the SGLang servers to that group or list their URLs." % s["router_worker_group"])
    if loopback:
        found.append("%s set sglang_server_host to a loopback address, so the router on %s cannot reach them. "
                     "Bind those servers to an address the router reaches (with an API key)." % (", ".join(loopback), me))
    if isinstance(key, str) and (KEY_FORBIDDEN.search(key) or not _travels(key)):
        found.append("router_api_key holds whitespace (a tab, a no-break or zero-width space too), a character outside "
                     "printable ASCII, a quote, a backslash, a backtick or a dollar sign: it is sent as 'Authorization: "
                     "Bearer KEY' and written double-quoted into the EnvironmentFile; use a key of printable ASCII "
                     "characters without them.")
    secret = secret_flags(s.get("router_extra_args"))
    if secret:
        found.append("router_extra_args sets %s, a secret flag (the router's parser takes an abbreviation for the whole "
                     "flag): every local user reads a command line. Give the API key as router_api_key, which reaches "
                     "the router through its root-only EnvironmentFile, and drop the flag." % ", ".join(secret))
    return [p for p in found if p]


def _travels(key):
    """True when the key can be sent as a Bearer credential (_http's rule)."""
    try:
        check_api_key(key, "router_api_key")
    except OptionError:
        return False
    return True


def secret_flags(extra_args):
    """The words of extra_args that set a secret flag, as written without their value: every spelling argparse takes
    (``--api-k``, ``--ap=X``), by _redact's rule."""
    if not isinstance(extra_args, (list, tuple)):
        return []
    return [_text(w).split("=", 1)[0] for w in extra_args if is_secret_flag(_text(w))]


def plan(settings, hostvars, hosts, me):
    """The router role's derived values from its settings, the hostvars of the worker group's hosts and this host.

    settings: every ``router_*`` variable (name -> value); hosts: the hosts of router_worker_group; me: this host.
    """
    s = settings
    _check_given(s)
    venv_dir = posixpath.dirname(_text(s["router_venv"]))
    hosts = list(hosts or [])
    workers = worker_urls(s, hosts, hostvars)
    loopback = loopback_workers(hosts, hostvars, me)
    args = cli_args(s, workers)
    launcher = venv_dir + "/launch_router.py"
    python = _text(s["router_venv"]) + "/bin/python"
    try:
        start, unwritable = exec_start([python, launcher] + args), []
    except ExecSyntaxError as exc:
        start, unwritable = None, ["A router argument cannot go into the unit's ExecStart=: %s (check router_extra_args)." % exc]
    try:
        verify = verify_command(_text(s["router_service_name"]) + ".service", strict=False)
    except ValueError as exc:
        verify, unwritable = None, unwritable + ["router_service_name: %s; set a unit name without .service." % exc]
    return {
        "dir": venv_dir,
        "launcher": launcher,
        "env_file": _text(s["router_config_dir"]) + "/router.env",
        "unit_path": "/etc/systemd/system/%s.service" % s["router_service_name"],
        "verify_command": verify,
        "worker_urls": workers,
        "loopback_workers": loopback,
        "cli_args": args,
        "check_argv": [python, launcher, "--check"] + args,
        "exec_start": start,
        "pins": ["sglang-router==" + _text(s["router_version"])],
        "pip_list": [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check", "--no-input"],
        "pip_install": pip_install(s),
        "wheelhouse_needed": s["router_pip_source"] == "wheelhouse",
        "wheelhouse_missing": (
            "router_pip_wheelhouse %s is not a directory on %s: set router_pip_wheelhouse_src to a controller directory "
            "made with `pip download -d DIR sglang-router==%s` (with the host's Python version) or copy the wheels there."
            % (s["router_pip_wheelhouse"], me, s["router_version"])),
        "wheelhouse_copy": wheelhouse_copy(s),
        "local_url": local_url(s["router_host"], s["router_port"]),
        "metrics_url": local_url(s["router_prometheus_host"], s["router_prometheus_port"]) + "/metrics",
        "problems": problems(s, workers, loopback, me) + unwritable,
    }


def wheelhouse_copy(settings):
    """The controller's wheelhouse to copy ({src, dest}, each ending in /), or None without router_pip_wheelhouse_src."""
    if _empty(settings.get("router_pip_wheelhouse_src")):
        return None
    return {"src": _text(settings["router_pip_wheelhouse_src"]).rstrip("/") + "/",
            "dest": _text(settings["router_pip_wheelhouse"]).rstrip("/") + "/"}


def wheels(settings, controller_find, host_find):
    """The wheelhouse files the host lacks (missing, or of another size) from the registered finds of
    wheelhouse_copy's src on the controller and dest on the host: {files: [{src, dest}], dirs: [{path}]} with
    the directories they go into (none when nothing is copied)."""
    _check_given(settings)
    copy = wheelhouse_copy(settings)
    if copy is None:
        raise PlanError("router_pip_wheelhouse_src is not set: there is no controller wheelhouse to copy")
    src, dest = copy["src"].rstrip("/"), copy["dest"].rstrip("/")
    wanted = [rel for rel, _size in unsynced(controller_find, host_find, src, dest)]
    # host_files creates a directory's parents: the deepest ones are enough
    parents = [dest] + [posixpath.join(dest, posixpath.dirname(rel)) for rel in wanted if posixpath.dirname(rel)]
    dirs = [{"path": p} for i, p in enumerate(parents) if wanted and p not in parents[:i]]
    return {"files": [{"src": posixpath.join(src, rel), "dest": posixpath.join(dest, rel)} for rel in wanted], "dirs": dirs}


# The phases of the role's one filter, llmops.sglang.router_plan: each takes the settings first.
PHASES = {"plan": plan, "wheels": wheels}
ERRORS = (PlanError,)
