"""llmops.sglang.controller_files through ansible-playbook: the action plugin writes on the controller, with no module
run, honours check mode, reports changed only when a file changes, and fails with a message on bad input."""

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
    - name: Save the reports
      llmops.sglang.controller_files:
        dir: "{{ out }}/gpu01"
        files:
          preflight.json: "{{ {'passed': true, 'host': 'gpu01'} | to_nice_json }}\\n"
          notes.md: "# gpu01\\n"
"""


def _play(tmp_path, *extra, play=PLAY):
    book = tmp_path / "play.yml"
    book.write_text(play)
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_CONFIG=str(cfg), ANSIBLE_HOME=str(tmp_path / "home"))
    # a host that cannot be reached: the action must not need a connection
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-c", "ssh", "-e", "ansible_host=192.0.2.1", "-e", "out=" + str(tmp_path / "reports"), *extra,
                           str(book)], env=env, capture_output=True, text=True, timeout=120, check=False)
    out = json.loads(proc.stdout)
    return proc.returncode, out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_check_mode_then_write_then_no_change(tmp_path):
    rc, result = _play(tmp_path, "--check")
    assert rc == 0 and result["changed"] is True and len(result["written"]) == 2 and not (tmp_path / "reports").exists()
    rc, result = _play(tmp_path)
    report = tmp_path / "reports" / "gpu01" / "preflight.json"
    assert rc == 0 and result["changed"] is True and json.loads(report.read_text()) == {"passed": True, "host": "gpu01"}
    assert '"passed"' not in json.dumps(result) and "# gpu01" not in json.dumps(result)  # no content echoed
    rc, result = _play(tmp_path)
    assert rc == 0 and result["changed"] is False and result["written"] == []


def test_bad_file_name_fails_with_the_fix(tmp_path):
    rc, result = _play(tmp_path, play=PLAY.replace("notes.md", "../escape.md"))
    assert rc == 2 and result["failed"] is True and "plain name inside dir" in result["msg"]
    assert not (tmp_path / "reports" / "escape.md").exists()


def test_missing_files_fails_naming_the_option(tmp_path):
    rc, result = _play(tmp_path, play=PLAY.split("        files:", maxsplit=1)[0])
    assert rc == 2 and result["failed"] is True and "files" in result["msg"]
