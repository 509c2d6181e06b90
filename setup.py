"""Build hook of the Python module: compile libkdalab.so with the project's
Makefile and ship it inside the package, so an installed `kdalab` needs no
source tree. Everything else is in pyproject.toml."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        subprocess.check_call(["make", "-C", HERE, "build/libkdalab.so"])
        super().run()
        dest = os.path.join(self.build_lib, "kdalab")
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(HERE, "build", "libkdalab.so"), dest)


# setuptools stages the package under build/python, away from the Makefile's
# object files in build/lib (which it would otherwise package too)
setup(cmdclass={"build_py": BuildWithLibrary},
      options={"build": {"build_base": os.path.join("build", "python")}})
