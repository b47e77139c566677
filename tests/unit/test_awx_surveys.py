# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""AWX surveys cannot drift from the roles.

Every survey question sets a variable that some role documents in meta/argument_specs.yml (main
options), with a matching type and the same choices; secrets are never asked in a survey. The checker
runs on the real surveys (no problem allowed) and on mutated copies (each mutation must be caught).
"""

import copy
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SURVEYS = sorted((ROOT / "awx" / "surveys").glob("*.yml"))
AWX_PLAYBOOK = ROOT / "playbooks" / "awx.yml"
BIN = pathlib.Path(sys.executable).parent
# The community package that bundles awx.awx for ansible-core 2.19 (what tests/lab/bin/install-collections uses).
ANSIBLE_BUNDLE = "ansible==12.3.0"

# AWX survey type -> the argument_specs types it can carry. A text answer is a string; "path" is a
# string that argument validation expands (~), so text questions may set it.
SURVEY_TYPES = {
    "text": ("str", "path"),
    "textarea": ("str",),
    "password": ("str",),
    "integer": ("int",),
    "float": ("float",),
    "multiplechoice": ("str",),
    "multiselect": ("list",),
}
CHOICE_TYPES = ("multiplechoice", "multiselect")
# Roles whose variables an injector may set before the role documents them (their specs arrive with them).
PENDING_ROLES = ("sglang_server", "benchmark")
# Variables that say where a request goes: the credential's key travels with the requests (audit_url gets the
# audit's Bearer key, the router sends its key to router_worker_urls_extra), so whoever launches a job must not set them.
DESTINATION_SUFFIXES = ("_url", "_urls", "_urls_extra", "_endpoint")


def _load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def role_options():
    """variable -> (role, spec) for the main options of every role."""
    options = {}
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parents[1].name
        for name, spec in (_load(spec_file)["argument_specs"]["main"].get("options") or {}).items():
            options[name] = (role, spec)
    return options


def _choices(value):
    """AWX takes choices as a list or as one string with a choice per line."""
    if isinstance(value, str):
        return [c for c in value.split("\n") if c]
    return list(value or [])


def survey_problems(survey, options):
    """Every way the survey disagrees with the roles' argument specs, as readable strings."""
    problems = []
    for key in ("name", "description", "spec"):
        if key not in survey:
            problems.append(f"survey has no {key!r} (AWX requires it)")
    seen = set()
    for q in survey.get("spec") or []:
        var = q.get("variable")
        where = f"question {q.get('question_name')!r} ({var})"
        if not q.get("question_name"):
            problems.append(f"{where}: no question_name")
        if var in seen:
            problems.append(f"{where}: variable asked twice")
        seen.add(var)
        if var not in options:
            problems.append(f"{where}: {var!r} is not a documented role argument (roles/*/meta/argument_specs.yml)")
            continue
        role, spec = options[var]
        stype, qtype = spec.get("type", "str"), q.get("type")
        if qtype not in SURVEY_TYPES:
            problems.append(f"{where}: unknown survey type {qtype!r}")
            continue
        if stype not in SURVEY_TYPES[qtype]:
            problems.append(f"{where}: survey type {qtype} gives {'/'.join(SURVEY_TYPES[qtype])}, role {role} documents {stype}")
        if spec.get("no_log") and qtype != "password":
            problems.append(f"{where}: a secret (no_log in role {role}) must not be a visible survey answer")
        if var.endswith(DESTINATION_SUFFIXES):
            problems.append(f"{where}: says where requests go, and the credential's API key goes with them: whoever "
                            f"launches the job could send it anywhere; set {var} in the inventory")
        if qtype in CHOICE_TYPES:
            asked, allowed = _choices(q.get("choices")), list(spec.get("choices") or [])
            if not allowed:
                problems.append(f"{where}: {qtype} but role {role} documents no choices")
            elif sorted(map(str, asked)) != sorted(map(str, allowed)):
                problems.append(f"{where}: choices {asked} differ from role {role}'s {allowed}")
            default = q.get("default")
            if default not in (None, ""):
                picked = _choices(default) if qtype == "multiselect" else [default]
                if any(d not in asked for d in picked):
                    problems.append(f"{where}: default {default!r} is not one of the choices")
        elif spec.get("choices"):
            problems.append(f"{where}: role {role} restricts {var} to {spec['choices']}; ask it as multiplechoice")
        default = q.get("default")
        if qtype == "integer" and default not in (None, "") and (isinstance(default, bool) or not isinstance(default, int)):
            problems.append(f"{where}: integer question with default {default!r}")
        if qtype == "float" and default not in (None, "") and not isinstance(default, (int, float)):
            problems.append(f"{where}: float question with default {default!r}")
        if qtype in ("integer", "float") and default not in (None, "") and not (q.get("min", default) <= default <= q.get("max", default)):
            problems.append(f"{where}: default {default} outside [{q.get('min')}, {q.get('max')}]")
    return problems


@pytest.fixture(scope="module")
def options():
    opts = role_options()
    assert opts, "no role documents any option"
    return opts


def test_there_are_surveys():
    assert {p.name for p in SURVEYS} >= {"deploy.yml", "audit.yml", "benchmark.yml"}


@pytest.mark.parametrize("path", SURVEYS, ids=[p.stem for p in SURVEYS])
def test_survey_matches_role_argument_specs(path, options):
    assert survey_problems(_load(path), options) == []


def test_every_job_template_survey_file_exists():
    play = _load_unsafe(AWX_PLAYBOOK)[0]
    templates = play["vars"]["awx_job_templates"]
    assert {t["playbook"] for t in templates} == {"site.yml", "playbooks/audit.yml", "playbooks/benchmark.yml"}
    for t in templates:
        assert (ROOT / "awx" / "surveys" / t["survey"]).is_file(), t


def test_credential_injects_documented_variables(options):
    """The credential type's extra vars are role arguments (or belong to a role still to come)."""
    play = _load_unsafe(AWX_PLAYBOOK)[0]
    task = next(t for t in play["tasks"] if "awx.awx.credential_type" in t)
    injected = task["awx.awx.credential_type"]["injectors"]["extra_vars"]
    assert "sglang_server_api_key" in injected
    for var in injected:
        pending = [r for r in PENDING_ROLES if var.startswith(r + "_") and not (ROOT / "roles" / r / "meta" / "argument_specs.yml").is_file()]
        if pending:
            continue
        assert var in options, f"{var} is injected but no role documents it"
        assert options[var][1].get("type", "str") == "str"


def _load_unsafe(path):
    """YAML with Ansible's !unsafe tag read as a plain string."""
    loader = type("UnsafeLoader", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: ld.construct_scalar(node))
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=loader)  # noqa: S506 - SafeLoader subclass


def _first_question(survey, qtype):
    return next(q for q in survey["spec"] if q["type"] == qtype)


def _deploy():
    return _load(ROOT / "awx" / "surveys" / "deploy.yml")


def _rename(s):
    _first_question(s, "integer")["variable"] += "_renamed"


def _drop_choice(s):
    _first_question(s, "multiplechoice")["choices"].pop()


def _add_choice(s):
    _first_question(s, "multiplechoice")["choices"].append("fp8")


def _change_choice(s):
    q = _first_question(s, "multiplechoice")
    q["choices"][0] = q["choices"][0].upper()


def _as_text(s):
    _first_question(s, "integer")["type"] = "text"


def _float_for_int(s):
    _first_question(s, "integer")["type"] = "float"


def _choice_as_text(s):
    q = _first_question(s, "multiplechoice")
    q["type"] = "text"
    q.pop("choices")


def _bad_default(s):
    _first_question(s, "multiplechoice")["default"] = "not-a-choice"


def _unknown_type(s):
    _first_question(s, "integer")["type"] = "number"


def _duplicate(s):
    s["spec"].append(copy.deepcopy(s["spec"][0]))


@pytest.mark.parametrize("mutate,expected", [
    (_rename, "is not a documented role argument"),
    (_drop_choice, "differ from role"),
    (_add_choice, "differ from role"),
    (_change_choice, "differ from role"),
    (_as_text, "documents int"),
    (_float_for_int, "documents int"),
    (_choice_as_text, "ask it as multiplechoice"),
    (_bad_default, "is not one of the choices"),
    (_unknown_type, "unknown survey type"),
    (_duplicate, "asked twice"),
], ids=lambda v: getattr(v, "__name__", "")[1:] if callable(v) else None)
def test_mutated_survey_is_caught(mutate, expected, options):
    survey = _deploy()
    assert survey_problems(survey, options) == []
    mutate(survey)
    problems = survey_problems(survey, options)
    assert any(expected in p for p in problems), problems


def test_renamed_role_argument_is_caught(options):
    """A role renaming a variable breaks the survey that still asks the old name."""
    survey = _deploy()
    var = survey["spec"][0]["variable"]
    renamed = dict(options)
    renamed[var + "_v2"] = renamed.pop(var)
    assert any(var in p and "not a documented role argument" in p for p in survey_problems(survey, renamed))


def test_role_choice_change_is_caught(options):
    """A role adding a choice breaks the survey that offers the old set."""
    survey = _deploy()
    q = _first_question(survey, "multiplechoice")
    role, spec = options[q["variable"]]
    changed = dict(options)
    changed[q["variable"]] = (role, dict(spec, choices=list(spec["choices"]) + ["new_choice"]))
    assert any("differ from role" in p for p in survey_problems(survey, changed))


def test_no_survey_asks_where_requests_go(options):
    """The audit's key goes to audit_url: a launcher must not choose it (nor any other destination)."""
    asked = {q["variable"] for path in SURVEYS for q in _load(path)["spec"] or []}
    assert "audit_url" not in asked and [v for v in asked if v.endswith(DESTINATION_SUFFIXES)] == []
    survey = _load(ROOT / "awx" / "surveys" / "audit.yml")
    survey["spec"].append({"question_name": "Server URL", "variable": "audit_url", "type": "text", "required": True,
                           "default": "http://127.0.0.1:30000"})
    assert any("audit_url" in p and "credential's API key" in p for p in survey_problems(survey, options))


def test_job_templates_take_no_free_variables_or_inventory_at_launch():
    """Extra vars or another inventory at launch would set audit_url past the survey."""
    play = _load_unsafe(AWX_PLAYBOOK)[0]
    task = next(t for t in play["tasks"] if "awx.awx.job_template" in t)["awx.awx.job_template"]
    assert task["ask_variables_on_launch"] is False and task["ask_inventory_on_launch"] is False
    assert "extra_vars" not in task


RENDER = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - {root}/roles/sglang_runtime/defaults/main.yml
    - {root}/roles/sglang_server/defaults/main.yml
  tasks:
    - ansible.builtin.copy:
        content: "{{{{ [sglang_runtime_checkpoint_path, sglang_server_model_path] | to_json }}}}"
        dest: {out}
        mode: "0600"
"""


def _paths(tmp_path, extra_vars):
    play, out = tmp_path / "paths.yml", tmp_path / "paths.json"
    play.write_text(RENDER.format(root=ROOT, out=out))
    args = [str(BIN / "ansible-playbook"), str(play)] + (["-e", json.dumps(extra_vars)] if extra_vars else [])
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


def test_deploy_survey_checkpoint_directory_drives_runtime_and_server(tmp_path):
    """Survey answers are extra vars: the one checkpoint question sets where the runtime puts the checkpoint and the
    directory the server loads; nothing else may set the server's path apart from it."""
    asked = [q for q in _deploy()["spec"] if "checkpoint_path" in q["variable"] or "model_path" in q["variable"]]
    assert [q["variable"] for q in asked] == ["sglang_runtime_checkpoint_path"]
    assert _paths(tmp_path, {"sglang_runtime_checkpoint_path": "/srv/models/qwen-new"}) == ["/srv/models/qwen-new"] * 2
    assert _paths(tmp_path, None) == [asked[0]["default"]] * 2
    # an inventory setting the server's path on its own would win over the role default and split the two again
    setters = [str(p.relative_to(ROOT)) for p in ROOT.glob("inventories/**/*.yml") if "sglang_server_model_path" in p.read_text()]
    assert setters == []


def test_secret_as_visible_question_is_caught(options):
    survey = {"name": "x", "description": "", "spec": [{"question_name": "key", "variable": "router_api_key", "type": "text", "required": False}]}
    assert any("secret" in p for p in survey_problems(survey, options))


@pytest.fixture(scope="module")
def awx_collections(tmp_path_factory):
    """A collections path with awx.awx (from awx/requirements.yml) taken out of the cached community wheel."""
    version = _load(ROOT / "awx" / "requirements.yml")["collections"][0]["version"]
    cache = pathlib.Path(os.environ.get("LLMOPS_CACHE", ROOT / ".cache")) / "wheels"
    wheels = sorted(cache.glob("ansible-%s-*.whl" % ANSIBLE_BUNDLE.split("==")[1]))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), ANSIBLE_BUNDLE], check=True, timeout=600)
        wheels = sorted(cache.glob("ansible-%s-*.whl" % ANSIBLE_BUNDLE.split("==")[1]))
    out = tmp_path_factory.mktemp("awx-collections")
    with zipfile.ZipFile(wheels[0]) as z:
        z.extractall(out, [m for m in z.namelist() if m.startswith("ansible_collections/awx/awx/")])
    manifest = out / "ansible_collections" / "awx" / "awx" / "MANIFEST.json"
    assert yaml.safe_load(manifest.read_text())["collection_info"]["version"] == version
    return "%s:%s" % (out, ROOT / "collections")


def _env(collections):
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))


def test_awx_playbook_syntax(awx_collections):
    result = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", str(AWX_PLAYBOOK)], cwd=ROOT,
                            env=_env(awx_collections), capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_awx_playbook_lint_with_module_arguments(awx_collections, tmp_path):
    """ansible-lint (production) with the experimental args rule: every awx.awx option is checked against
    the module's argument spec, the closest thing to a dry run without an AWX server."""
    config = tmp_path / "ansible-lint.yml"
    config.write_text("profile: production\noffline: true\nskip_action_validation: false\nenable_list: [args]\n")
    result = subprocess.run([str(BIN / "ansible-lint"), "-c", str(config), "--strict", "--nocolor", str(AWX_PLAYBOOK)], cwd=ROOT,
                            env=_env(awx_collections), capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_awx_playbook_lint_catches_a_bad_module_option(awx_collections, tmp_path):
    """The lint above would notice an option awx.awx does not have (it is not a no-op)."""
    config = tmp_path / "ansible-lint.yml"
    config.write_text("profile: production\noffline: true\nskip_action_validation: false\nenable_list: [args]\n")
    bad = tmp_path / "playbooks" / "awx.yml"
    bad.parent.mkdir()
    option = "        scm_update_on_launch: true\n"
    bad.write_text(AWX_PLAYBOOK.read_text().replace(option, option + "        scm_polling: true\n", 1))
    assert "scm_polling" in bad.read_text()
    result = subprocess.run([str(BIN / "ansible-lint"), "-c", str(config), "--strict", "--nocolor", str(bad)], cwd=tmp_path,
                            env=_env(awx_collections), capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode != 0
    assert "scm_polling" in result.stdout + result.stderr
