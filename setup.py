"""The _posenc extension for `pip install .`: CMake builds it (the same targets as `make`: _posenc
over posenc::core and posenc::plot, and libposenc_torch_ops.so, the torch operators apply_rope
calls, over libtorch), setuptools packages both beside python/posenc.
POSENC_PIP_BUILD_DIR chooses CMake's build folder (default: build-pip in the checkout, so ccache
and a second install reuse what the first compiled)."""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
BUILD = pathlib.Path(os.environ.get("POSENC_PIP_BUILD_DIR", ROOT / "build-pip"))


def _torch_cmake_prefix() -> str:
    import torch  # the build runs with --no-build-isolation: the environment's torch
    return torch.utils.cmake_prefix_path


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build = BUILD / "cmake"
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                               "-DPOSENC_WITH_TORCH=ON", "-DPOSENC_BUILD_TESTS=OFF",
                               # the libtorch of the torch this interpreter imports: the operators
                               # library must match it (Debian's python3-torch and libtorch-dev: 1.13)
                               f"-DCMAKE_PREFIX_PATH={_torch_cmake_prefix()}",
                               f"-DPython3_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "posenc_python",
                               "-j", str(os.cpu_count() or 1)])
        package = build / "python" / "posenc"
        built = sorted(package.glob("_posenc*.so"))
        ops = package / "libposenc_torch_ops.so"
        if not built or not ops.exists():
            raise RuntimeError(f"CMake built no _posenc extension or no libposenc_torch_ops.so under {package}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)
        shutil.copyfile(ops, target.parent / ops.name)


# setuptools' own folders (build/, *.egg-info) go under BUILD too: the checkout's build/ is CMake's.
(BUILD / "egg-info").mkdir(parents=True, exist_ok=True)
setup(ext_modules=[CMakeExtension("posenc._posenc")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": str(BUILD / "setuptools")}, "egg_info": {"egg_base": str(BUILD / "egg-info")}})
