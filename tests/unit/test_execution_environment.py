# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The AWX execution environment definition is one ansible-builder accepts, and it carries the project's pins.

``ansible-builder create`` validates the definition against its v3 schema and writes the build context
(no image is built); the tests read what it wrote.
"""

import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EE = ROOT / "meta" / "execution-environment.yml"
BUILDER = pathlib.Path(sys.executable).parent / "ansible-builder"


def _load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _create(definition, context):
    if not BUILDER.exists():
        pytest.fail(f"ansible-builder is not installed next to {sys.executable} (requirements.txt pins it)")
    return subprocess.run([str(BUILDER), "create", "-f", str(definition), "-c", str(context), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, timeout=120, check=False)


def _pins(path):
    """name -> version for the name==version lines of a requirements file (PEP 503 names)."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==([^\s#;]+)", line.strip())
        if m:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee") / "context"
    result = _create(EE, out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_definition_is_v3():
    ee = _load(EE)
    assert ee["version"] == 3
    assert ee["images"]["base_image"]["name"]


def test_containerfile_uses_the_base_image_and_the_pinned_ansible(context):
    ee = _load(EE)
    containerfile = (context / "Containerfile").read_text(encoding="utf-8")
    assert ee["images"]["base_image"]["name"] in containerfile
    assert ee["dependencies"]["ansible_core"]["package_pip"] in containerfile
    assert ee["dependencies"]["ansible_runner"]["package_pip"] in containerfile
    assert ee["dependencies"]["python_interpreter"]["python_path"] in containerfile
    # The dependency files are copied in and installed (introspection merges them with the collections').
    for name in ("requirements.txt", "bindep.txt", "requirements.yml"):
        assert f"_build/{name}" in containerfile or name in containerfile


def test_context_carries_python_system_and_galaxy_deps(context):
    ee = _load(EE)["dependencies"]
    assert (context / "_build" / "requirements.txt").read_text(encoding="utf-8").split() == ee["python"]
    bindep = (context / "_build" / "bindep.txt").read_text(encoding="utf-8")
    for package in ("openssh-client", "rsync", "git"):
        assert re.search(rf"^{package}\b", bindep, re.M), f"{package} missing from bindep.txt"
    collections = {c["name"]: c["version"] for c in _load(context / "_build" / "requirements.yml")["collections"]}
    assert collections == {c["name"]: c["version"] for c in ee["galaxy"]["collections"]}


def test_galaxy_deps_cover_the_collection_dependencies():
    """Every collection galaxy.yml depends on is in the EE, with the same version range."""
    wanted = _load(ROOT / "galaxy.yml").get("dependencies") or {}
    have = {c["name"]: str(c.get("version", "*")) for c in _load(EE)["dependencies"]["galaxy"]["collections"]}
    assert wanted, "galaxy.yml declares no dependencies"
    for name, version in wanted.items():
        assert have.get(name) == str(version), f"{name}: EE has {have.get(name)!r}, galaxy.yml wants {version!r}"


def test_pins_equal_requirements_txt():
    """ansible-core, ansible-runner (when pinned there) and the Python deps use the versions requirements.txt pins."""
    ee = _load(EE)["dependencies"]
    pins = _pins(ROOT / "requirements.txt")
    wanted = [ee["ansible_core"]["package_pip"]] + ee["python"]
    assert "ansible-core" in ee["ansible_core"]["package_pip"]
    for requirement in wanted:
        name, version = (requirement.split("==", 1) + [""])[:2]
        assert version, f"{requirement} is not pinned with =="
        key = re.sub(r"[-_.]+", "-", name).lower()
        assert pins.get(key) == version, f"{requirement}: requirements.txt pins {pins.get(key)!r}"


@pytest.mark.parametrize("mutation", [
    pytest.param(lambda ee: ee.update(bogus_key=1), id="unknown-top-level-key"),
    pytest.param(lambda ee: ee["dependencies"].update(pyton=["jmespath"]), id="misspelt-dependency-key"),
    pytest.param(lambda ee: ee["options"].update(package_manager="/usr/bin/dnf"), id="unknown-option"),
    pytest.param(lambda ee: ee["dependencies"].update(python={"jmespath": "1.1.0"}), id="python-deps-as-mapping"),
])
def test_invalid_definition_fails(tmp_path, mutation):
    ee = _load(EE)
    mutation(ee)
    bad = tmp_path / "execution-environment.yml"
    bad.write_text(yaml.safe_dump(ee, sort_keys=False), encoding="utf-8")
    result = _create(bad, tmp_path / "context")
    assert result.returncode != 0
    assert "DefinitionError" in result.stderr + result.stdout or "not valid" in result.stderr + result.stdout
    assert not (tmp_path / "context" / "Containerfile").exists()
