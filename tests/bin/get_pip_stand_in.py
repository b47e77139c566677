"""Stand-in for pip's get-pip.py bootstrap script, for ansible-test on machines without its file server.

ansible-test runs this file as a module with pip's install options as arguments; like get-pip.py
it installs pip from the wheel that sits next to this file.
"""

import glob
import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
wheel = sorted(glob.glob(os.path.join(here, "pip-*.whl")))[-1]
sys.path.insert(0, wheel)
# get-pip.py's own options (--no-setuptools, --no-wheel) mean "install pip only": drop them.
args = [a for a in sys.argv[1:] if not a.startswith("pip==") and a not in ("--no-setuptools", "--no-wheel")]
sys.argv = ["pip", "install", "--upgrade", "--force-reinstall", wheel] + args
runpy.run_module("pip", run_name="__main__", alter_sys=True)
