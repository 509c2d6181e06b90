"""Build hook of the Python module: compile libkdalab.so with the project's
Makefile and ship it inside the package, so an installed `kdalab` needs no
source tree. Everything else is in pyproject.toml."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        subprocess.check_call(["make", "-C", HERE, "build/libkdalab.so"])
        super().run()
        dest = os.path.join(self.build_lib, "kdalab")
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(HERE, "build", "libkdalab.so"), dest)


try:  # setuptools >= 70 has its own bdist_wheel; before, the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel


class BinaryDistribution(Distribution):
    """The package carries a compiled libkdalab.so: not pure Python."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """A platform wheel, py3-none-<platform> (py3-none-linux_x86_64 here), not
    py3-none-any: libkdalab.so is machine code for this platform, so pip must
    not install the wheel on another one. It is loaded with ctypes, not as a
    CPython extension, so one wheel serves every Python 3."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


# setuptools stages the package under build/python, away from the Makefile's
# object files in build/lib (which it would otherwise package too)
setup(cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel},
      distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join("build", "python")}})
