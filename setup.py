"""Packaging glue for the one thing pyproject.toml cannot say: a ``.pth`` file at the top of site-packages.

``pytest_agentreplay_guard.pth`` makes Python child processes of a replaying test install the network
guard (see ``start`` in ``pytest_agentreplay/guard/__init__.py``). It is copied into the build root so
that both the wheel and an editable install (``pip install -e .``, PEP 660) put it next to the package.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "pytest_agentreplay_guard.pth"


class build_py_with_pth(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib)
        if getattr(self, "editable_mode", False):
            # PEP 660 (setuptools >= 64): the editable wheel maps packages back to the source tree and
            # ignores build_lib; what lies in the install dir goes into the wheel as it is.
            target = Path(self.get_finalized_command("install").install_lib)
        self.copy_file(str(Path(__file__).parent / PTH), str(target / PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            outputs.append(str(Path(self.build_lib) / PTH))
        return outputs


setup(cmdclass={"build_py": build_py_with_pth})
