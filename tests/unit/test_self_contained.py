"""The tree carries its own test inputs: nothing the tests, the lab or CI run reads a folder beside the
clone, and every fixtures folder says where its samples came from."""

import hashlib
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
# The patterns themselves live here, so this file is the one not scanned.
OUTSIDE = re.compile("|".join([
    "LLMOPS_SHARED",
    r"\.\./shared",
    r"parents?\b[^\n]{0,40}[\"']shared[\"']",
    r"/work/shared",
]))
SCANNED = ["tests", "extensions", "Makefile", ".ci", "ansible.cfg", "galaxy.yml"]


def _files():
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            yield path
            continue
        for f in sorted(path.rglob("*")):
            if f.is_file() and f != pathlib.Path(__file__).resolve() and "__pycache__" not in f.parts and f.suffix not in {".pyc", ".whl"}:
                yield f


def test_nothing_reads_outside_the_clone():
    offenders = []
    for f in _files():
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "test inputs must live in tests/fixtures:\n" + "\n".join(offenders)


def test_the_pattern_catches_a_reader_of_the_folder_beside_the_clone():
    assert OUTSIDE.search('os.environ.get("LLMOPS_SHARED")')
    assert OUTSIDE.search('ROOT.parent / "shared"')
    assert not OUTSIDE.search("extensions/molecule/_shared/create.yml")


@pytest.mark.parametrize("folder", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_every_fixture_folder_has_a_manifest(folder):
    manifest = FIXTURES / folder / "MANIFEST.md"
    assert manifest.is_file(), f"tests/fixtures/{folder} needs a MANIFEST.md saying where its samples came from"
    assert len(manifest.read_text(encoding="utf-8").split()) > 20


def test_the_log_answer_key_names_only_files_that_are_here():
    answers = json.loads((FIXTURES / "sglang-logs" / "expected.json").read_text(encoding="utf-8"))
    assert len(answers) == len(list((FIXTURES / "sglang-logs").glob("*.log"))) == 11
    for answer in answers:
        data = (FIXTURES / "sglang-logs" / answer["file"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (answer["bytes"], answer["sha256"])


def test_the_gpu_profiles_name_only_captures_that_are_here():
    """Each lab GPU profile says which real captures it was built from: tests/fixtures/gpu-outputs/NN-*.txt by number, or
    a tests/fixtures path; every one named must be in the tree."""
    profiles = sorted((ROOT / "tests" / "lab" / "gpu" / "profiles").glob("*/profile.json"))
    assert len(profiles) >= 9
    for profile in profiles:
        for source in json.loads(profile.read_text(encoding="utf-8"))["sources"]:
            if source.startswith("tests/fixtures/"):
                assert (ROOT / source.split()[0]).exists(), "%s names %s" % (profile.parent.name, source)
            elif source[:2].isdigit():
                for number in source.split()[0].split("/"):
                    assert list((FIXTURES / "gpu-outputs").glob("%s-*.txt" % number)), "%s names capture %s" % (profile.parent.name, number)
