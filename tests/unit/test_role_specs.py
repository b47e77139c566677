"""Every role documents exactly the variables it defaults, with the same default values."""

import pathlib

import pytest
import yaml

ROLES = sorted(p for p in (pathlib.Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


def _load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_specs_match_defaults(role):
    defaults = _load(role / "defaults" / "main.yml")
    options = _load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options), "defaults/main.yml and meta/argument_specs.yml differ"
    for name, value in defaults.items():
        assert name.startswith(role.name + "_"), f"{name} is not prefixed with the role name"
        spec = options[name]
        if value is None:
            assert spec.get("required", False) is False and "default" not in spec, f"{name}: null default must be optional, no default"
        else:
            assert spec.get("default") == value, f"{name}: argument_specs default {spec.get('default')!r} != {value!r}"
