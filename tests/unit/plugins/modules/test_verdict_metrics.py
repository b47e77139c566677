"""llmops.sglang.verdict_metrics through ansible-playbook: check mode writes nothing, the first run writes, a rerun
with the same verdict reports no change but moves the file's mtime, a new verdict rewrites it, with a diff."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Publish the guard's verdict
      llmops.sglang.verdict_metrics:
        source: kv_guard
        result: {passed: %s, verdict: %s, expected: bf16, available_signals: 3, min_signals: 3}
        labels: {unit: sglang-qwen}
        dir: "{{ out }}"
"""


def _play(tmp_path, passed, *extra):
    book = tmp_path / "play.yml"
    book.write_text(PLAY % (("true", "bf16") if passed else ("false", "fp8")))
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_CONFIG=str(cfg), ANSIBLE_HOME=str(tmp_path / "home"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, "-e", "out=" + str(tmp_path / "textfile"),
                           *extra, str(book)], env=env, capture_output=True, text=True, timeout=120, check=False)
    out = json.loads(proc.stdout)
    return proc.returncode, out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_check_write_rerun_and_a_new_verdict(tmp_path):
    (tmp_path / "textfile").mkdir()
    path = tmp_path / "textfile" / "llmops_sglang_kv_guard.prom"
    rc, result = _play(tmp_path, False, "--check")
    assert rc == 0 and result["changed"] is True and not result["written"] and not path.exists()
    rc, result = _play(tmp_path, False)
    assert rc == 0 and result["changed"] is True and result["written"]
    assert 'llmops_sglang_kv_guard_ok{expected_kv_dtype="bf16",kv_dtype="fp8",unit="sglang-qwen"} 0\n' in path.read_text()
    os.utime(path, (1000, 1000))
    rc, result = _play(tmp_path, False)
    assert rc == 0 and result["changed"] is False and result["heartbeat"] and path.stat().st_mtime > 1000
    rc, result = _play(tmp_path, True, "--diff")
    assert rc == 0 and result["changed"] is True
    assert 'kv_dtype="fp8"' in result["diff"]["before"] and 'kv_dtype="bf16",unit="sglang-qwen"} 1' in result["diff"]["after"]


def test_a_missing_directory_is_not_written_nor_created(tmp_path):
    rc, result = _play(tmp_path, True)
    assert rc == 0 and result["changed"] is False and "install prometheus-node-exporter" in result["not_written"]
    assert not (tmp_path / "textfile").exists()
