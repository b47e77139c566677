"""The preload callback: the collection's filters and action plugins are imported once in ansible-playbook, so the
workers it forks compile none of them again."""

import configparser
import os
import pathlib
import subprocess
import sys
import textwrap

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK_BIN = pathlib.Path(sys.executable).parent / "ansible-playbook"

# After preload() in a parent, a forked child gets every filter without the collection loader compiling anything.
FORK_CHECK = textwrap.dedent("""
    import os, pathlib, sys
    from ansible.plugins.loader import filter_loader, init_plugin_loader
    from ansible.utils.collection_loader import _collection_finder
    init_plugin_loader([sys.argv[1]])
    from ansible_collections.llmops.sglang.plugins.callback.preload import preload
    failed = preload()[1] if sys.argv[2] == "preload" else []
    names = sorted(p.stem for p in pathlib.Path(sys.argv[1], "ansible_collections/llmops/sglang/plugins/filter").glob("[!_]*.py"))
    pid = os.fork()
    if pid == 0:
        compiled = []
        real = _collection_finder._AnsibleCollectionPkgLoaderBase.get_code
        def counting(self, fullname):
            compiled.append(fullname)
            return real(self, fullname)
        _collection_finder._AnsibleCollectionPkgLoaderBase.get_code = counting
        missing = [n for n in names if filter_loader.get("llmops.sglang." + n) is None]
        print("child compiled %d, missing %s" % (len(compiled), missing), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("parent failed %s, filters %d" % (failed, len(names)))
""")


def _fork_check(mode):
    out = subprocess.run([sys.executable, "-c", FORK_CHECK, str(ROOT / "collections"), mode], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return out


def test_a_worker_forked_after_preload_compiles_nothing():
    out = _fork_check("preload")
    assert "child compiled 0, missing []" in out and "parent failed []" in out
    filters = len(list((ROOT / "plugins" / "filter").glob("[!_]*.py")))
    assert "filters %d" % filters in out and filters > 10


def test_without_preload_the_worker_compiles_the_filters_itself():
    out = _fork_check("none")
    compiled = int(out.split("child compiled ")[1].split(",")[0])
    assert compiled > 20 and "missing []" in out


def test_ansible_playbook_loads_it_from_the_repository_config(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(textwrap.dedent("""
        - hosts: localhost
          connection: local
          gather_facts: false
          tasks:
            - ansible.builtin.debug:
                msg: "{{ '127.0.0.1' | llmops.sglang.is_loopback }}"
    """))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    run = subprocess.run([str(PLAYBOOK_BIN), "-vvv", "-i", "localhost,", str(playbook)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    plugins = len(list((ROOT / "plugins" / "filter").glob("[!_]*.py")) + list((ROOT / "plugins" / "action").glob("[!_]*.py")))
    assert "llmops.sglang.preload: %d plugins loaded ahead of the workers" % plugins in run.stdout
    assert "not loaded ahead" not in run.stdout + run.stderr
    assert '"msg": true' in run.stdout or "msg: true" in run.stdout


def test_the_repository_and_molecule_enable_it():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    assert "llmops.sglang.preload" in cfg["defaults"]["callbacks_enabled"].split(",")
    molecule = yaml.safe_load((ROOT / "extensions" / "molecule" / "config.yml").read_text())["provisioner"]
    assert "llmops.sglang.preload" in molecule["env"]["ANSIBLE_CALLBACKS_ENABLED"].split(",")
