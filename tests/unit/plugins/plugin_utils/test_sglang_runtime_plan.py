"""The sglang_runtime role's decisions (_sglang_runtime_plan.py, filters runtime_*): equal to what the role's Jinja rendered before
they moved to Python (tests/fixtures/runtime-role), on the real lab checkpoint, a real `pip list` and real
checkpoint_info results."""

import base64
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import sys

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.filter.sglang_runtime_plan import sglang_runtime_plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_runtime_plan
from ansible_collections.llmops.sglang.plugins.module_utils._host_state import gather
from ansible_collections.llmops.sglang.plugins.modules import checkpoint_info

ROOT = pathlib.Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures"
BEFORE = json.loads((FIXTURES / "runtime-role" / "rendered-before.json").read_text())
DEFAULTS = yaml.safe_load((ROOT / "roles" / "sglang_runtime" / "defaults" / "main.yml").read_text())
NAMES = yaml.safe_load((ROOT / "roles" / "sglang_runtime" / "vars" / "main.yml").read_text())["_sglang_runtime_setting_names"]
LAB = FIXTURES / "checkpoints" / "qwen3.5-397b-a17b-nvfp4"
PIP_LIST = (FIXTURES / "tool-outputs" / "pip-list-sglang-0.5.23-cpu.json").read_text()
REV = "0123456789abcdef0123456789abcdef01234567"


def settings(**changes):
    """The role's settings as vars/main.yml hands them to the filters: defaults, the hub CLI templated."""
    values = {name: DEFAULTS[name] for name in NAMES}
    values["sglang_runtime_checkpoint_hf_cli"] = DEFAULTS["sglang_runtime_venv"] + "/bin/hf"
    values.update({"sglang_runtime_" + k: v for k, v in changes.items()})
    return values


def results(**named):
    """The role's results as vars/main.yml hands them over: every name, null for what has not run."""
    out = dict((name, None) for name in _sglang_runtime_plan.RESULTS)
    out.update(("_sglang_runtime_" + k, v) for k, v in named.items())
    return out


# The role's one filter, phase by phase, with the results each phase reads.
def runtime_pip(settings, state=None, listed_after=None):
    return sglang_runtime_plan(settings, "pip", results(state=state, pip_list_after=listed_after))


def runtime_checkpoint(settings, before=None, gate=None, dest=None):
    return sglang_runtime_plan(settings, "checkpoint", results(before=before, gate=gate, dir=dest))


def runtime_copy(settings, source_files, host_files=None, rsync=(None, None)):
    return sglang_runtime_plan(settings, "copy", results(src=source_files, dest=host_files, rsync_ctl=rsync[0], rsync_host=rsync[1]))


def runtime_hf_download(settings, job, sizes=None, started=None, final=None):
    return sglang_runtime_plan(settings, "hf_download", results(hf_status=job, hf_sizes=sizes, hf_started=started, hf_final=final))


def runtime_record(settings, pip, old_stamp=None, verified=None):
    state = {"read": {settings["sglang_runtime_stamp_path"]: old_stamp}}
    return sglang_runtime_plan(settings, "record", results(pip=pip, state=state, checkpoint={"verified": verified}))


def listed(packages):
    return {"changed": False, "rc": 0, "stdout": json.dumps(packages)}


def find(root, skip=()):
    """An ansible.builtin.find result (path, size) of a real directory."""
    files = []
    for directory, _dirs, names in os.walk(root):
        files += [{"path": os.path.join(directory, n), "size": os.path.getsize(os.path.join(directory, n))}
                  for n in names if n not in skip]
    return {"changed": False, "files": files, "matched": len(files)}


def run_checkpoint_info(path, capsys, gpu=None):
    with patch_module_args(dict({"path": str(path), "verify_shards": True}, **({"gpu": gpu} if gpu else {}))):
        with pytest.raises(SystemExit):
            checkpoint_info.main()
    return json.loads(capsys.readouterr().out)


def test_the_settings_handed_to_the_filters_are_the_roles_settings_without_the_token():
    assert set(NAMES) <= set(DEFAULTS)
    assert "sglang_runtime_checkpoint_hf_token" not in NAMES
    # every setting the filters read is handed over
    source = (ROOT / "plugins" / "plugin_utils" / "_sglang_runtime_plan.py").read_text()
    read = {"sglang_runtime_" + m for m in re.findall(r'P \+ "([a-z_]+)"', source)}
    assert read <= set(NAMES), read - set(NAMES)


# ---- equal to the role's Jinja before the move ------------------------------------------------------------------

@pytest.mark.parametrize("case", BEFORE["pip"], ids=lambda c: c["input"]["source"] + "-" + c["input"]["venv"])
def test_pip_plan_equals_the_roles_jinja(case):
    given = case["input"]
    chosen = settings(
        packages=given["packages"], pip_source=given["source"], pip_index_url=given["index_url"],
        pip_extra_index_urls=given["extra"], pip_wheelhouse=given["wheelhouse"],
        pip_require_hashes=given["require_hashes"], pip_extra_args=given["extra_args"], venv=given["venv"])
    # one rendered case has a pin without a hash under require_hashes (the role's check refuses it): the plan is
    # compared with hashes off, the options and the file with the case's own setting
    plan = _sglang_runtime_plan.pip_plan(dict(chosen, sglang_runtime_pip_require_hashes=False), listed=listed(given["listed"]))
    assert _sglang_runtime_plan.pip_options(chosen) == case["options"]
    assert plan["pins"] == case["pins"]
    assert plan["requirements_path"] == case["requirements_path"]
    # the template's text below its 3-line managed comment (the rendering kept its last two lines)
    assert _sglang_runtime_plan.requirements_text(given["packages"], given["require_hashes"]) == case["requirements"].split("\n", 2)[2]
    assert sorted(plan["pending"]) == sorted(case["unmet"])
    assert plan["install_argv"] == [given["venv"] + "/bin/python", "-m", "pip", "install"] + plan["options"] + [
        "-r", case["requirements_path"]]


@pytest.mark.parametrize("case", BEFORE["stage"], ids=lambda c: c["input"]["source"])
def test_staging_decision_equals_the_roles_jinja(case):
    given = case["input"]
    before = given["before"]
    plan = _sglang_runtime_plan.checkpoint_plan(settings(checkpoint_source=given["source"], checkpoint_hf_revision=REV,
                                                         checkpoint_controller_src="/ctl/ckpt", checkpoint_nfs_src="nas:/models",
                                                         checkpoint_path="/models/x",
                                                         checkpoint_require_quant_config=given["require_quant"]), before)
    assert plan["stage"] is case["stage"]
    assert plan["verify_before"] is (given["source"] in ("controller", "hf"))


@pytest.mark.parametrize("case", BEFORE["copy"], ids=lambda c: c["input"]["method"] + "-" + str(c["input"]["rsync_host"]))
def test_copy_plan_equals_the_roles_jinja(case):
    given = case["input"]
    host = {"changed": False, "files": given["dest_files"]} if given["dest_files"] is not None else {"files": []}
    plan = _sglang_runtime_plan.copy_plan(settings(checkpoint_controller_src=given["src"], checkpoint_path=given["dest"],
                                                   checkpoint_copy_method=given["method"]),
                                          {"files": given["src_files"]}, host, [given["rsync_controller"], given["rsync_host"]])
    files = plan[plan["method"] + "_files"]
    assert plan["method"] == case["method"]
    assert [[f["path"], f["size"]] for f in files] == case["to_copy"]
    assert plan["dirs"] == [given["dest"] + "/" + d for d in case["dirs"]]
    assert plan["staged"] == {"method": case["method"], "files": [p for p, _size in case["to_copy"]],
                              "bytes": int(case["staged_bytes"])}
    assert [f["src"] for f in files] == [given["src"] + "/" + p for p, _size in case["to_copy"]]
    assert [f["dest"] for f in files] == [given["dest"] + "/" + p for p, _size in case["to_copy"]]


def test_copy_labels_equal_the_roles_jinja():
    items = BEFORE["copy_labels"]
    plan = _sglang_runtime_plan.copy_plan(settings(checkpoint_controller_src="/c", checkpoint_path="/m", checkpoint_copy_method="copy"),
                                          {"files": [{"path": "/c/" + p, "size": s} for p, s in items]}, {"files": []})
    assert [f["label"] for f in plan["copy_files"]] == BEFORE["copy_label_text"]


@pytest.mark.parametrize("case", BEFORE["hf"], ids=lambda c: str(c["input"]["timeout"]))
def test_hf_download_state_equals_the_roles_jinja(case):
    given = case["input"]
    plan = _sglang_runtime_plan.checkpoint_plan(settings(checkpoint_source="hf", checkpoint_hf_revision=REV, checkpoint_path="/models/x",
                                                         checkpoint_timeout=given["timeout"],
                                                         checkpoint_progress_interval=given["interval"]))
    assert plan["hf"]["retries"] == int(case["retries"])
    final = _sglang_runtime_plan.hf_download(given["status"], plan, final=given["final"])
    assert final["ok"] is case["ok"]
    assert final["message"] == case["message"]
    progress = _sglang_runtime_plan.hf_download(given["status"], plan, {"stdout_lines": given["sizes"]}, started=1000, now=1042)
    assert progress["progress"] == "nvidia/Qwen3.5-397B-A17B-NVFP4@0123456789ab %s: %s in /models/x after 42 s" % (
        case["progress_state"], case["progress_size"])


# ---- the pin rule is pip's (fixed: a pin spelled differently from pip's version string) ----------------------

def test_pending_pins_on_a_real_pip_list_follow_pips_rule():
    plan = _sglang_runtime_plan.pip_plan(settings(packages=[
        {"name": "sglang", "version": "0.5.23"}, {"name": "Torch", "version": "2.13"},  # 2.13 == 2.13.0+cpu for pip
        {"name": "torch", "version": "2.13.0+cu130"}, {"name": "PyYAML", "version": "6.0.4"},
        {"name": "flashinfer-python", "version": "0.7.2", "extras": ["cu13"]}]),
        listed={"stdout": PIP_LIST})
    assert plan["pending"] == ["torch==2.13.0+cu130", "flashinfer-python==0.7.2"]
    assert plan["installed"] == json.loads(PIP_LIST)
    assert "torch==2.13.0+cu130" in plan["unmet_message"] and "/opt/sglang/venv" in plan["unmet_message"]


def test_the_list_after_pip_install_wins_and_marks_the_install():
    pins = [{"name": "idna", "version": "3.10"}]
    before_install = listed([])
    after_install = listed([{"name": "idna", "version": "3.10"}])
    assert _sglang_runtime_plan.pip_plan(settings(packages=pins), None, before_install)["pending"] == ["idna==3.10"]
    plan = _sglang_runtime_plan.pip_plan(settings(packages=pins), None, before_install, after_install)
    assert plan["pending"] == [] and plan["installed_now"] is True
    skipped = _sglang_runtime_plan.pip_plan(settings(packages=pins), None, after_install, {"skipped": True, "changed": False})
    assert skipped["pending"] == [] and skipped["installed_now"] is False
    # check mode on a venv that does not exist yet: nothing listed, every pin pending
    assert _sglang_runtime_plan.pip_plan(settings(packages=pins), None, {"skipped": True})["pending"] == ["idna==3.10"]


# ---- bad settings fail naming the setting and the fix ---------------------------------------------------------

@pytest.mark.parametrize("pin,require_hashes", [
    ({"name": "torch", "version": 2.1}, False),            # unquoted in YAML: a float
    ({"name": "torch"}, False),
    ({"name": "-torch", "version": "2.1"}, False),
    ({"name": "torch", "version": "2.1", "extras": "cu13"}, False),
    ({"name": "torch", "version": "2.1", "hash": "md5:00"}, False),
    ({"name": "torch", "version": "2.1", "hash": {"sha256": "00"}}, False),
    ({"name": "torch", "version": "2.1"}, True),
    ("torch==2.1", False),
])
def test_a_bad_pin_is_named_with_the_form_to_write(pin, require_hashes):
    with pytest.raises(AnsibleFilterError, match=r"sglang_runtime_packages entry .* is not a pin: give name, version"):
        runtime_pip(settings(packages=[{"name": "ok", "version": "1.0"}, pin], pip_require_hashes=require_hashes))


def test_require_hashes_accepts_a_hash_or_a_list_and_writes_them():
    plan = runtime_pip(settings(pip_require_hashes="true", packages=[
        {"name": "a", "version": "1.0", "hash": "sha256:ab"}, {"name": "b", "version": "2.0", "hash": ["sha256:cd", "sha512:ef"]}]))
    assert plan["requirements"].splitlines() == [
        "# The pins of sglang_runtime_packages with the hashes pip checks (--require-hashes).",
        "a==1.0 \\", "    --hash=sha256:ab", "b==2.0 \\", "    --hash=sha256:cd \\", "    --hash=sha512:ef"]
    assert "--require-hashes" in plan["options"]


@pytest.mark.parametrize("changes,message", [
    ({"pip_source": "git"}, 'sglang_runtime_pip_source must be "index" or "wheelhouse" (not git)'),
    ({"packages": []}, "sglang_runtime_packages must not be empty"),
    ({"pip_require_hashes": "maybe"}, "sglang_runtime_pip_require_hashes must be true or false"),
])
def test_bad_package_settings_are_named(changes, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        runtime_pip(settings(**changes))


def test_a_missing_wheelhouse_is_named_before_anything_is_installed(tmp_path):
    wheels = tmp_path / "wheels"
    wheelhouse = settings(pip_source="wheelhouse", pip_wheelhouse=str(wheels))
    with pytest.raises(AnsibleFilterError, match="sglang_runtime_pip_wheelhouse .*/wheels is not a directory on the host"):
        runtime_pip(wheelhouse, gather(paths=[str(wheels)]))
    wheels.mkdir()
    assert "--no-index" in runtime_pip(wheelhouse, gather(paths=[str(wheels)]))["options"]
    # the index source never looks at the wheelhouse
    pending = runtime_pip(settings(), gather(paths=[str(tmp_path / "absent")]))["pending"]
    assert pending == ["sglang==0.5.23", "sglang-kernel==0.4.10", "torch==2.14.1", "flashinfer-python==0.7.2"]


def runtime_state(chosen, requirements):
    """The role's host_state run (packages.yml), on the real filesystem and this interpreter's real pip list."""
    plan = runtime_pip(chosen)
    return gather(paths=[chosen["sglang_runtime_pip_wheelhouse"]], commands=[{"name": "pip_list", "argv": plan["list_argv"]}],
                  directories=[{"path": plan["venv_parent"]}],
                  files=[{"path": plan["requirements_path"], "content": requirements}])


def test_the_host_state_names_what_the_role_must_do_and_nothing_on_a_settled_host(tmp_path):
    parent = tmp_path / "opt"
    chosen = settings(venv=str(parent / "venv"), packages=[{"name": "pytest", "version": importlib.metadata.version("pytest")}])
    text = "# managed\n" + runtime_pip(chosen)["requirements"]
    fresh = runtime_pip(chosen, runtime_state(chosen, text))
    assert fresh["changes"] == ["%s differs (missing)" % parent, "%s differs (missing)" % (parent / "venv/requirements.txt"),
                                "no venv at %s" % (parent / "venv"), "pins not met: pytest==%s" % importlib.metadata.version("pytest")]
    (parent / "venv" / "bin").mkdir(parents=True)
    parent.chmod(0o755)
    python = parent / "venv" / "bin" / "python"
    python.write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)   # this interpreter's venv: it holds pytest
    python.chmod(0o755)
    (parent / "venv" / "requirements.txt").write_text(text)
    settled = runtime_pip(chosen, runtime_state(chosen, text))
    assert settled["changes"] == [] and settled["pending"] == []
    (parent / "venv" / "requirements.txt").chmod(0o600)
    assert runtime_pip(chosen, runtime_state(chosen, text))["changes"] == [
        "%s differs (mode)" % (parent / "venv/requirements.txt")]


def test_a_pip_list_that_fails_is_named_not_read_as_an_empty_venv(tmp_path):
    failing = {"commands": {"pip_list": {"rc": 1, "stdout": "", "stderr": "No module named pip", "timed_out": False,
                                         "not_found": False}}}
    with pytest.raises(AnsibleFilterError, match="pip list failed in the venv .rc 1.: No module named pip"):
        runtime_pip(settings(), failing)


@pytest.mark.parametrize("changes,message", [
    ({"checkpoint_source": "s3"}, "sglang_runtime_checkpoint_source must be local, nfs, controller or hf (not s3)"),
    ({"checkpoint_path": "models/x"}, "sglang_runtime_checkpoint_path an absolute path (not models/x)"),
    ({"checkpoint_copy_method": "scp"}, "sglang_runtime_checkpoint_copy_method auto, synchronize or copy"),
    ({"checkpoint_source": "controller", "checkpoint_controller_src": "ckpt"},
     "sglang_runtime_checkpoint_source=controller needs sglang_runtime_checkpoint_controller_src, an absolute"),
    ({"checkpoint_source": "nfs", "checkpoint_nfs_src": "nas/models"}, 'sglang_runtime_checkpoint_nfs_src as "server:/export"'),
    ({"checkpoint_source": "nfs", "checkpoint_nfs_src": "nas:/m", "checkpoint_nfs_mountpoint": "/mnt/"},
     r"inside sglang_runtime_checkpoint_nfs_mountpoint \(/mnt/\)"),
    ({"checkpoint_source": "hf", "checkpoint_hf_revision": "main"}, "pinned to a full 40-character commit id.*not main"),
    ({"checkpoint_source": "hf", "checkpoint_hf_revision": REV, "checkpoint_hf_repo": "no-owner"}, 'hf_repo as "owner/name"'),
    ({"checkpoint_source": "hf", "checkpoint_hf_revision": REV, "checkpoint_progress_interval": 0},
     "sglang_runtime_checkpoint_progress_interval must be a whole number of at least 1, not 0"),
])
def test_bad_checkpoint_settings_are_named(changes, message):
    with pytest.raises(AnsibleFilterError, match=message if "(" not in message or "\\(" in message else re.escape(message)):
        runtime_checkpoint(settings(**changes))


def test_an_nfs_checkpoint_is_mounted_with_the_settings_and_must_lie_inside_the_mount():
    plan = runtime_checkpoint(settings(checkpoint_source="nfs", checkpoint_nfs_src="nas:/export/models",
                                       checkpoint_nfs_mountpoint="/models/"))
    assert plan["nfs"] == [{"src": "nas:/export/models", "path": "/models/", "fstype": "nfs",
                            "opts": "ro,hard,noatime,_netdev"}]
    assert runtime_checkpoint(settings())["nfs"] == []
    with pytest.raises(AnsibleFilterError):  # /models2 is not inside /models
        runtime_checkpoint(settings(checkpoint_source="nfs", checkpoint_nfs_src="nas:/m", checkpoint_path="/models2/x"))


def test_the_hub_download_options_carry_no_token_and_the_stall_timeout():
    plan = runtime_checkpoint(settings(checkpoint_source="hf", checkpoint_hf_revision=REV, checkpoint_path="/srv/hf/ckpt"))
    assert plan["hf"]["args"] == {"cli": "/opt/sglang/venv/bin/hf", "repo": "nvidia/Qwen3.5-397B-A17B-NVFP4", "revision": REV,
                                  "local_dir": "/srv/hf/ckpt", "max_workers": 8, "stall_timeout": 600}
    assert runtime_checkpoint(settings(checkpoint_source="hf", checkpoint_hf_revision=REV,
                                       download_stall_timeout=0))["hf"]["args"]["stall_timeout"] == 0
    with pytest.raises(AnsibleFilterError, match="sglang_runtime_download_stall_timeout must be a whole number of at least 0"):
        runtime_checkpoint(settings(checkpoint_source="hf", checkpoint_hf_revision=REV, download_stall_timeout=-1))
    # the role's check-mode line, as its Jinja wrote it
    assert plan["hf"]["check_mode"] == ("check mode: would download nvidia/Qwen3.5-397B-A17B-NVFP4@%s into /srv/hf/ckpt" % REV)
    assert "hf" not in runtime_checkpoint(settings())


def test_the_server_environment_always_keeps_the_hub_offline():
    plan = runtime_checkpoint(settings(server_environment={"HF_HUB_OFFLINE": "0", "CUDA_MODULE_LOADING": "LAZY"}))
    assert plan["environment"] == {"HF_HUB_OFFLINE": "1", "CUDA_MODULE_LOADING": "LAZY"}


# ---- real checkpoint_info results and the real lab checkpoint -------------------------------------------------

def test_staging_and_the_quant_gate_on_real_checkpoint_info_results(tmp_path, capsys):
    complete = run_checkpoint_info(LAB, capsys)
    staged = settings(checkpoint_source="controller", checkpoint_controller_src="/ctl")
    assert runtime_checkpoint(staged, complete)["stage"] is False
    truncated = tmp_path / "truncated"
    shutil.copytree(LAB, truncated)
    os.truncate(truncated / "model-00002-of-00004.safetensors", 300)
    assert runtime_checkpoint(staged, dict(run_checkpoint_info(truncated, capsys), failed=False))["stage"] is True
    noquant = tmp_path / "noquant"
    shutil.copytree(LAB, noquant)
    os.remove(noquant / "hf_quant_config.json")
    without = run_checkpoint_info(noquant, capsys)
    assert runtime_checkpoint(staged, without)["stage"] is True
    assert runtime_checkpoint(dict(staged, sglang_runtime_checkpoint_require_quant_config=False), without)["stage"] is False
    # a complete checkpoint before staging is the gate's result: the gate does not run again
    assert runtime_checkpoint(staged, complete)["gate"] is False and runtime_checkpoint(staged, complete)["verified"] is complete
    assert runtime_checkpoint(staged, without)["gate"] is True
    local = runtime_checkpoint(settings(), {"skipped": True})
    assert local["gate"] is True and local["verified"] == {"skipped": True}
    assert runtime_checkpoint(settings(), {"skipped": True}, complete)["verified"] is complete
    # the gate after staging
    runtime_checkpoint(settings(), None, complete)
    with pytest.raises(AnsibleFilterError, match=r"checkpoint /models/\S+ has no hf_quant_config.json: .*"
                                                 r"sglang_runtime_checkpoint_require_quant_config: false"):
        runtime_checkpoint(settings(), None, without)
    runtime_checkpoint(settings(checkpoint_require_quant_config=False), None, without)
    runtime_checkpoint(settings(), None, {"skipped": True, "changed": False})


def test_copy_plan_on_the_real_lab_checkpoint_copies_only_the_damaged_files(tmp_path):
    host = tmp_path / "host"
    shutil.copytree(LAB, host)
    os.remove(host / "model-00003-of-00004.safetensors")
    os.truncate(host / "model-00001-of-00004.safetensors", 100)
    chosen = settings(checkpoint_controller_src=str(LAB), checkpoint_path=str(host))
    both = [{"rc": 0}, {"rc": 0}]
    plan = runtime_copy(chosen, find(LAB), find(host), both)
    assert plan["staged"]["files"] == ["model-00001-of-00004.safetensors", "model-00003-of-00004.safetensors"]
    assert plan["staged"]["bytes"] == 1024 and plan["method"] == "synchronize" and plan["copy_files"] == []
    assert plan["synchronize_files"][1]["label"] == "model-00003-of-00004.safetensors (512.00 Bytes): 2/2 files, 1.00 KB of 1.00 KB copied"
    # rsync missing on the host: auto falls back to copy, a forced synchronize fails naming both sides
    assert runtime_copy(chosen, find(LAB), find(host), ({"rc": 0}, {"rc": 127}))["method"] == "copy"
    with pytest.raises(AnsibleFilterError, match=r"synchronize needs rsync on the controller \(found\) and on the host \(missing\)"):
        runtime_copy(dict(chosen, sglang_runtime_checkpoint_copy_method="synchronize"), find(LAB), find(host),
                     [{"rc": 0}, {"rc": 127}])
    # copy forced: the rsync probes do not matter
    assert runtime_copy(dict(chosen, sglang_runtime_checkpoint_copy_method="copy"), find(LAB), find(host), both)["method"] == "copy"
    # a complete copy needs nothing
    complete = tmp_path / "complete"
    shutil.copytree(LAB, complete)
    assert runtime_copy(dict(chosen, sglang_runtime_checkpoint_path=str(complete)), find(LAB), find(complete),
                        both)["staged"]["files"] == []
    # check mode before the directory exists: the host was not listed, nothing is copied, every file is named
    dry = runtime_copy(chosen, find(LAB), {"skipped": True, "changed": False}, both)
    assert dry["synchronize_files"] == [] and dry["dirs"] == [] and len(dry["staged"]["files"]) == 7


def test_a_controller_without_files_is_named():
    with pytest.raises(AnsibleFilterError, match="sglang_runtime_checkpoint_controller_src /empty holds no files on the controller"):
        runtime_copy(settings(checkpoint_controller_src="/empty"), {"files": [], "matched": 0}, {"files": []})


def test_a_failed_download_names_the_cause_and_a_timeout_names_the_limit():
    hub = settings(checkpoint_source="hf", checkpoint_hf_revision=REV)
    failed = runtime_hf_download(hub, {"finished": 0}, final={"finished": 1, "rc": 3, "msg": "non-zero return code",
                                                              "stderr_lines": ["x"] * 20 + ["RevisionNotFoundError: 404"]})
    assert not failed["ok"] and "failed (rc 3)" in failed["message"] and failed["message"].endswith("RevisionNotFoundError: 404")
    assert failed["message"].count(" | ") == 14
    timeout = runtime_hf_download(hub, {"finished": 0}, final={"finished": 0})
    assert not timeout["ok"] and "did not finish within 86400 s" in timeout["message"]
    done = runtime_hf_download(hub, {"finished": 1, "rc": 0}, final={"skipped": True})
    assert done["ok"] and done["finished"]
    stalled = runtime_hf_download(hub, {"finished": 0}, final={"finished": 1, "failed": True, "rc": None, "stalled": True,
                                                               "msg": "no progress for 600 s (stall_timeout 600): ...",
                                                               "stderr_lines": []})
    assert not stalled["ok"] and " stalled:\nno progress for 600 s" in stalled["message"]
    line = runtime_hf_download(hub, {"finished": 1, "rc": None, "stalled": True}, {"stdout_lines": ["65536"]}, started=0)
    assert " stalled: 64.00 KB in " in line["progress"]


# ---- the record --------------------------------------------------------------------------------------------------

def stamp(record):
    return {"changed": False, "content": base64.b64encode(json.dumps(record).encode()).decode()}


def test_the_record_keeps_installed_at_until_pip_installs_again(capsys):
    # the reference deployment's GPUs (RTX PRO 6000, compute capability 12.0), as gpu_info reports them
    verified = run_checkpoint_info(LAB, capsys, {"gpu_count": 8, "gpus": [{"compute_capability": "12.0"}] * 8})
    pins = [{"name": "idna", "version": "3.10"}]
    quiet = _sglang_runtime_plan.pip_plan(settings(packages=pins), None, listed([{"name": "idna", "version": "3.10"}]))
    record = runtime_record(settings(packages=pins), quiet, stamp({"installed_at": "2026-11-30T10:00:00Z"}), verified)
    assert record["installed_at"] == "2026-11-30T10:00:00Z"
    assert record["pins"] == ["idna==3.10"] and record["python"] == "/opt/sglang/venv/bin/python"
    assert record["requirements"] == "/opt/sglang/venv/requirements.txt"
    assert record["checkpoint"] == {"source": "local", "path": DEFAULTS["sglang_runtime_checkpoint_path"], "verified": True,
                                    "shards": verified["shards"]["count"], "bytes": verified["shards"]["on_disk_bytes"],
                                    "quant_method": verified["quantization"]["method"],
                                    "kv_cache_dtype_auto": "fp8_e4m3", "kv_cache_dtype_auto_decided_for": "capability 12.0"}
    assert record["environment"] == {"HF_HUB_OFFLINE": "1"}
    installed = _sglang_runtime_plan.pip_plan(settings(packages=pins), None, listed([]), listed([{"name": "idna", "version": "3.10"}]))
    assert _sglang_runtime_plan.runtime_record(installed, settings(), stamp({"installed_at": "old"}), verified,
                                               now="2026-12-01T19:00:00Z")["installed_at"] == "2026-12-01T19:00:00Z"
    # no earlier stamp (slurp failed) or an unreadable one: no earlier install time, no traceback
    assert runtime_record(settings(), quiet, {"failed": True, "msg": "file not found"}, verified)["installed_at"] is None
    assert runtime_record(settings(), quiet, {"content": base64.b64encode(b"{not json").decode()}, verified)["installed_at"] is None
    # the gate did not run (check mode while staging)
    skipped = runtime_record(settings(), quiet, None, {"skipped": True})["checkpoint"]
    assert skipped["verified"] is False and skipped["shards"] is None


def test_pip_list_that_is_not_json_is_named():
    with pytest.raises(AnsibleFilterError, match="pip list --format=json printed no JSON list"):
        runtime_pip(settings(), {"commands": {"pip_list": {"rc": 0, "stdout": "WARNING: something"}}})


@pytest.mark.parametrize("path", ["/", "/tmp", "/tmp/", "//tmp", "/models/../tmp", "/dev/shm", "/root", "/home", "/etc", "/usr",
                                  "/usr/local", "/var", "/var/tmp", "/boot", "/proc", "/proc/1/root", "/sys/kernel", "/run",
                                  "/run/user/0", "/opt"])
@pytest.mark.parametrize("source", ["controller", "hf"])
def test_a_staged_checkpoint_in_a_system_directory_is_refused(path, source):
    normal = "/" + os.path.normpath(path).strip("/")
    with pytest.raises(AnsibleFilterError, match=re.escape("sglang_runtime_checkpoint_path is %s, a system directory: with "
                                                           "source %s the role creates the checkpoint directory" % (normal, source))):
        runtime_checkpoint(settings(checkpoint_source=source, checkpoint_path=path, checkpoint_hf_revision=REV,
                                    checkpoint_controller_src="/ctl/ckpt"))


@pytest.mark.parametrize("path", ["/models/x", "/dev/shm/ckpt", "/tmp/ckpt", "/home/ops/models/q", "/srv/hf/ckpt", "/mnt/ckpt"])
def test_a_checkpoint_directory_of_its_own_is_accepted(path):
    plan = runtime_checkpoint(settings(checkpoint_source="hf", checkpoint_path=path, checkpoint_hf_revision=REV))
    assert plan["path"] == path and plan["create_dir"] is None  # no stat given
    # the role writes nothing into a local checkpoint: any path is its owner's business
    assert runtime_checkpoint(settings(checkpoint_source="local", checkpoint_path="/tmp"))["path"] == "/tmp"


def test_an_nfs_mount_over_a_system_directory_is_refused():
    with pytest.raises(AnsibleFilterError, match="sglang_runtime_checkpoint_nfs_mountpoint is /, a system directory: with "
                                                 "source nfs the role mounts the export there"):
        runtime_checkpoint(settings(checkpoint_source="nfs", checkpoint_nfs_src="nas:/m", checkpoint_nfs_mountpoint="/",
                                    checkpoint_path="/models/x"))


def _stat(path):
    """An ansible.builtin.stat result of a real path (the fields create_dir reads)."""
    found = {"exists": os.path.lexists(path)}
    if found["exists"]:
        found.update(isdir=os.path.isdir(path), mode="%04o" % (os.stat(path).st_mode & 0o7777))
    return {"changed": False, "stat": found}


def test_the_role_creates_only_a_checkpoint_directory_that_is_not_there(tmp_path):
    sticky = tmp_path / "shared"
    sticky.mkdir()
    sticky.chmod(0o1777)  # what /tmp is: staging must leave it as it is
    (tmp_path / "file").write_text("x")
    base = settings(checkpoint_source="hf", checkpoint_hf_revision=REV)
    assert runtime_checkpoint(dict(base, sglang_runtime_checkpoint_path=str(sticky)), dest=_stat(sticky))["create_dir"] is False
    missing = tmp_path / "models" / "q"
    assert runtime_checkpoint(dict(base, sglang_runtime_checkpoint_path=str(missing)), dest=_stat(missing))["create_dir"] is True
    assert runtime_checkpoint(base, dest={"skipped": True})["create_dir"] is None
    with pytest.raises(AnsibleFilterError, match="checkpoint_path %s exists and is not a directory" % re.escape(str(tmp_path / "file"))):
        runtime_checkpoint(dict(base, sglang_runtime_checkpoint_path=str(tmp_path / "file")), dest=_stat(tmp_path / "file"))


def test_the_copy_creates_only_the_subdirectories_the_host_lacks(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    for rel in ("config.json", "a/b/model-1.safetensors", "c/model-2.safetensors", "d/e.txt"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)
    (dest / "a" / "b").mkdir(parents=True)
    (dest / "d").mkdir()
    (dest / "d" / "e.txt").write_text("d/e.txt")

    def find_any(root):  # ansible.builtin.find with file_type any: files and directories, isdir and isreg set
        entries = []
        for directory, dirs, names in os.walk(root):
            entries += [{"path": os.path.join(directory, n), "size": os.path.getsize(os.path.join(directory, n)),
                         "isdir": n in dirs, "isreg": n not in dirs} for n in dirs + names]
        return {"changed": False, "files": entries}

    plan = _sglang_runtime_plan.copy_plan(settings(checkpoint_controller_src=str(src), checkpoint_path=str(dest), checkpoint_copy_method="copy"),
                                          find(src), find_any(dest))
    assert [f["path"] for f in plan["copy_files"]] == ["a/b/model-1.safetensors", "c/model-2.safetensors", "config.json"]
    assert plan["dirs"] == [str(dest / "c")]  # a/b exists and keeps its mode; d's file is there already
