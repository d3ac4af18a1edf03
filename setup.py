"""Build hook: ship the top-level lua/ directory inside the wheel as echomq/lua/."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithLua(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).parent / "lua"
        target = Path(self.build_lib) / "echomq" / "lua"
        shutil.copytree(source, target, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithLua})
