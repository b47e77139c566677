# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_router_plan: the router role's derived values. The command line is checked with the real router's own parser
(sglang-router, pinned in requirements.txt); URLs parse by the collection's one URL rule."""

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.router_plan import router_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _router_plan as rp
from ansible_collections.llmops.sglang.plugins.module_utils._http import parse_base_url
from ansible_collections.llmops.sglang.plugins.module_utils._systemd import verify_command
from ansible_collections.llmops.sglang.plugins.module_utils._systemd_exec import unit_commands

ROOT = pathlib.Path(__file__).resolve().parents[4]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "router" / "defaults" / "main.yml").read_text())
KEY = "sk-plan-test-77a1"


def settings(**changes):
    s = dict(DEFAULTS, router_api_key=KEY)
    s.update(changes)
    return s


HOSTVARS = {
    "gpu1": {"ansible_host": "10.0.0.11", "sglang_server_host": "0.0.0.0"},
    "gpu2": {"ansible_host": "10.0.0.12", "sglang_server_host": "fd00::12", "sglang_server_port": 31000},
    "gpu3": {},
    "router1": {"ansible_host": "10.0.0.5", "sglang_server_host": "127.0.0.1"},
}


def plan(hosts=("gpu1", "gpu2", "gpu3"), me="router1", **changes):
    return rp.plan(settings(**changes), HOSTVARS, list(hosts), me)


def test_worker_urls_follow_the_collection_s_url_rule():
    urls = plan(router_worker_urls_extra=["http://10.9.9.9:30000", "http://10.0.0.11:30000"])["worker_urls"]
    # wildcard bind -> ansible_host; IPv6 bind bracketed with its own port; nothing known -> the inventory name;
    # the extra URL already in the list is kept once
    assert urls == ["http://10.0.0.11:30000", "http://[fd00::12]:31000", "http://gpu3:30000", "http://10.9.9.9:30000"]
    assert [parse_base_url(u)[1:] for u in urls] == [("10.0.0.11", 30000), ("fd00::12", 31000), ("gpu3", 30000),
                                                     ("10.9.9.9", 30000)]


@pytest.mark.parametrize("bind, refused", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.11", False), ("fd00::11", False),
])
def test_workers_on_loopback_elsewhere_are_refused(bind, refused):
    hostvars = dict(HOSTVARS, gpu1={"sglang_server_host": bind}, router1={"sglang_server_host": bind})
    p = rp.plan(settings(), hostvars, ["gpu1", "router1"], "router1")
    assert p["loopback_workers"] == (["gpu1"] if refused else [])  # the router's own server may use loopback
    assert any("gpu1 set sglang_server_host to a loopback address" in m for m in p["problems"]) is refused


def test_the_command_line_is_what_the_real_router_parses():
    from sglang_router.launch_router import parse_router_args  # the real router (requirements.txt)

    p = plan(router_policy="round_robin", router_cache_threshold=0.55, router_queue_size="64",
             router_extra_args=["--log-dir", "/var/log/router"])
    args = parse_router_args(p["cli_args"])
    assert args.host == "0.0.0.0" and args.port == 30000 and args.worker_urls == p["worker_urls"]
    assert (args.policy, args.cache_threshold, args.queue_size) == ("round_robin", 0.55, 64)
    assert args.prometheus_port == DEFAULTS["router_prometheus_port"] and args.log_dir == "/var/log/router"
    # every flag of the table reaches the parser with the setting's value
    for flag, name in rp.FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"))
        expected = {"router_policy": "round_robin", "router_cache_threshold": 0.55, "router_queue_size": 64}.get(
            name, DEFAULTS[name])
        assert value == expected or str(value) == str(expected), (flag, value, expected)
    assert KEY not in " ".join(p["cli_args"] + p["check_argv"]) and KEY not in p["exec_start"]


def test_every_flag_setting_is_a_documented_default():
    assert [name for _flag, name in rp.FLAGS if name not in DEFAULTS] == []


def test_exec_start_keeps_every_word_literal_for_systemd():
    p = plan(router_extra_args=["--log-dir", "/var/log/50% $HOME \\n"])
    # read back as systemd reads the unit (_systemd_exec, checked against real systemd)
    [command] = unit_commands("[Service]\nExecStart=%s\n" % p["exec_start"])
    assert command["argv"] == ["/opt/sglang-router/venv/bin/python", "/opt/sglang-router/launch_router.py"] + p["cli_args"]
    assert '"/var/log/50%% $$HOME \\\\n"' in p["exec_start"]
    refused = plan(router_extra_args=["--log-dir", "/var/log\nExecStartPre=/bin/sh"])
    assert refused["exec_start"] is None and "cannot go into the unit's ExecStart=" in refused["problems"][-1]


def test_the_unit_is_verified_under_its_own_name_and_a_name_that_cannot_be_is_refused():
    assert plan()["verify_command"] == verify_command("sglang-router.service", strict=False)
    assert plan(router_service_name="llm-router")["unit_path"] == "/etc/systemd/system/llm-router.service"
    refused = plan(router_service_name="llm router")
    assert refused["verify_command"] is None and refused["problems"][-1].startswith("router_service_name: 'llm router.service' is not")


@pytest.mark.parametrize("changes, source", [
    ({}, []),
    ({"router_pip_index_url": "https://pypi.example/simple"}, ["--index-url=https://pypi.example/simple"]),
    ({"router_pip_source": "wheelhouse", "router_pip_index_url": "https://x"}, ["--no-index", "--find-links=/opt/sglang-router/wheelhouse"]),
])
def test_pip_install_takes_the_configured_source(changes, source):
    p = plan(router_pip_extra_args=["--proxy=http://proxy:3128"], **changes)
    assert p["pip_install"] == (["/opt/sglang-router/venv/bin/python", "-m", "pip", "install", "--disable-pip-version-check",
                                 "--no-input", "--progress-bar=off"] + source + ["--proxy=http://proxy:3128", "sglang-router==0.3.2"])
    assert p["pins"] == ["sglang-router==0.3.2"] and p["wheelhouse_needed"] is (changes.get("router_pip_source") == "wheelhouse")


def test_wheelhouse_copy_is_a_directory_copy():
    assert plan()["wheelhouse_copy"] is None
    assert plan(router_pip_source="wheelhouse", router_pip_wheelhouse_src="/srv/wheels//")["wheelhouse_copy"] == {
        "src": "/srv/wheels/", "dest": "/opt/sglang-router/wheelhouse/"}


@pytest.mark.parametrize("host, url", [
    ("0.0.0.0", "http://127.0.0.1:30000"), ("::", "http://[::1]:30000"), ("fd00::5", "http://[fd00::5]:30000"),
    ("10.0.0.5", "http://10.0.0.5:30000"),
])
def test_the_checks_reach_the_router_on_its_own_host(host, url):
    p = plan(router_host=host, router_prometheus_host=host)
    assert p["local_url"] == url and p["metrics_url"] == url.replace("30000", "29000") + "/metrics"
    parse_base_url(p["metrics_url"])


NO_KEY = "(reachable from other machines) but no router_api_key is set"


@pytest.mark.parametrize("changes, refused", [
    ({"router_api_key": ""}, True),
    ({"router_api_key": None}, True),
    ({"router_api_key": "", "router_host": "::"}, True),
    ({"router_api_key": "", "router_host": "127.0.0.1"}, False),
    ({"router_api_key": "", "router_host": "::1"}, False),
    ({"router_api_key": "", "router_no_api_key_waiver": "closed lab network"}, False),
    ({"router_api_key": "", "router_no_api_key_waiver": "  "}, True),
    ({}, False),
])
def test_a_keyless_network_bind_is_refused(changes, refused):
    assert any(NO_KEY in m for m in plan(**changes)["problems"]) is refused


@pytest.mark.parametrize("changes", [
    {"router_version": 0.3}, {"router_version": "latest"}, {"router_pip_source": "git"},
    {"router_pip_wheelhouse_src": "/srv/wheels"}, {"router_policy": "fastest"}, {"router_prometheus_port": "30000"},
    {"router_extra_args": "--log-dir /x"},
])
def test_bad_settings_are_refused_with_the_fix(changes):
    problems = plan(**changes)["problems"]
    assert len(problems) == 1 and problems[0].startswith("Bad router settings:"), problems
    assert "router_policy one of random, round_robin, cache_aware, power_of_two, manual" in problems[0]


@pytest.mark.parametrize("key", ["sk-q9 z", 'sk-q9"z', "sk-q9'z", "sk-q9\\z", "sk-q9$z", "sk-q9`z", "sk-q9\nz"])
def test_a_key_systemd_would_mangle_is_refused_without_quoting_it(key):
    problems = plan(router_api_key=key)["problems"]
    assert any(m.startswith("router_api_key holds whitespace") for m in problems)
    assert not any("sk-q9" in m for m in problems)


def test_no_worker_is_refused():
    problems = plan(hosts=())["problems"]
    assert problems == ["No worker URL: the inventory group sglang_servers (router_worker_group) has no host and "
                        "router_worker_urls_extra is empty. Add the SGLang servers to that group or list their URLs."]


def test_a_missing_setting_is_named_by_the_filter():
    s = settings()
    del s["router_policy"], s["router_port"]
    with pytest.raises(AnsibleFilterError, match="router_port, router_policy not set"):
        router_plan(s, "plan", HOSTVARS, ["gpu1"], "router1")


def test_only_the_wheels_the_host_lacks_are_copied():
    """Real find results' shape (path, size) on both sides: a missing wheel, a truncated one and one in a subfolder
    are copied; an identical one is not; nothing to copy means no directory either."""
    copy = settings(router_pip_wheelhouse_src="/srv/wheels", router_pip_wheelhouse="/opt/sglang-router/wheelhouse")

    def found(root, files):
        return {"files": [{"path": root + name, "size": size} for name, size in files], "matched": len(files)}
    controller = found("/srv/wheels/", [("a-1.whl", 10), ("b-2.whl", 20), ("sub/c-3.whl", 30), ("same-1.whl", 5)])
    host = found("/opt/sglang-router/wheelhouse/", [("b-2.whl", 7), ("same-1.whl", 5), ("stale-0.whl", 1)])
    plan = router_plan(copy, "wheels", controller, host)
    assert [f["src"] for f in plan["files"]] == ["/srv/wheels/a-1.whl", "/srv/wheels/b-2.whl", "/srv/wheels/sub/c-3.whl"]
    assert plan["files"][2]["dest"] == "/opt/sglang-router/wheelhouse/sub/c-3.whl"
    assert plan["dirs"] == [{"path": "/opt/sglang-router/wheelhouse"}, {"path": "/opt/sglang-router/wheelhouse/sub"}]
    unchanged = rp.wheels(copy, controller, found("/opt/sglang-router/wheelhouse/", [
        ("a-1.whl", 10), ("b-2.whl", 20), ("sub/c-3.whl", 30), ("same-1.whl", 5)]))
    assert unchanged == {"files": [], "dirs": []}
    # a host without the directory: find skipped it (check mode) or found nothing
    assert len(rp.wheels(copy, controller, {"skipped": True})["files"]) == 4
    with pytest.raises(AnsibleFilterError, match="router_pip_wheelhouse_src is not set"):
        router_plan(settings(), "wheels", controller, host)


def _router_parser():
    import argparse  # pylint: disable=import-outside-toplevel

    from sglang_router.router_args import RouterArgs  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser, use_router_prefix=False)  # what parse_router_args builds
    return parser


def _sets_the_key(words):
    """What the real router's parser makes of ``words`` after a valid command line: the API key it took, else None."""
    import contextlib  # pylint: disable=import-outside-toplevel
    import io  # pylint: disable=import-outside-toplevel

    from sglang_router.launch_router import parse_router_args  # pylint: disable=import-outside-toplevel

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return parse_router_args(["--worker-urls", "http://10.0.0.11:30000"] + words).api_key
    except (SystemExit, ValueError):  # ambiguous, unknown or a bad value: the parser refuses it
        return None


def test_every_spelling_the_real_router_takes_for_the_key_is_refused_in_extra_args():
    parser = _router_parser()
    options = sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))
    secret = [o for a in parser._actions for o in a.option_strings if a.dest == "api_key"]
    assert secret == ["--api-key"]
    # every prefix of every flag, as a separate word and inline: the parser decides which ones set the key
    spellings = sorted({o[:end] for o in options for end in range(3, len(o) + 1)})
    taken = [w for p in spellings for w in ([p, "sk-abbrev-1"], [p + "=sk-abbrev-1"]) if _sets_the_key(w) == "sk-abbrev-1"]
    assert ["--ap", "sk-abbrev-1"] in taken and ["--api-k=sk-abbrev-1"] in taken and ["--api-key", "sk-abbrev-1"] in taken
    missed = [w for w in taken if not any(m.startswith("router_extra_args sets " + w[0].split("=")[0] + ",")
                                          for m in plan(router_extra_args=w)["problems"])]
    assert missed == []
    # no real flag of another option is refused (--api-key's neighbours included)
    wrong = [o for o in options if o != "--api-key" and rp.secret_flags([o, "1"])
             and parser._option_string_actions[o].dest not in ("control_plane_api_keys", "oracle_password")]
    assert wrong == []
    assert not any("router_extra_args sets" in m for m in plan(router_extra_args=["--log-dir", "/var/log/router"])["problems"])


def test_the_refusal_names_the_flag_never_the_key():
    problems = plan(router_extra_args=["--ap=sk-inline-secret-9", "--log-dir", "/x"])["problems"]
    assert [m for m in problems if m.startswith("router_extra_args sets --ap, a secret flag")] and "sk-inline" not in " ".join(problems)


def test_the_launcher_refuses_the_key_in_any_spelling_the_parser_takes(capsys):
    import runpy  # pylint: disable=import-outside-toplevel

    launcher = runpy.run_path(str(ROOT / "roles" / "router" / "files" / "launch_router.py"))
    base = ["--check", "--worker-urls", "http://10.0.0.11:30000"]
    for words in (["--api-key", "sk-l1"], ["--api-k", "sk-l1"], ["--ap=sk-l1"]):
        assert launcher["main"](base + words) == 2
        err = capsys.readouterr().err
        assert "pass the API key as SGLANG_ROUTER_API_KEY" in err and "sk-l1" not in err
    assert launcher["main"](base + ["--log-dir", "/var/log/router"]) == 0


@pytest.mark.parametrize("key", ["sk-q9\tz", "sk-q9\u00a0z", "sk-q9\u200bz", "sk-q9\u00e9z", "sk-q9\x7fz"])
def test_a_key_that_cannot_travel_as_a_bearer_header_is_refused(key):
    problems = plan(router_api_key=key)["problems"]
    assert any(m.startswith("router_api_key holds whitespace (a tab, a no-break or zero-width space too)") for m in problems)
    assert not any("sk-q9" in m for m in problems)
