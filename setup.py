"""Builds dpcore._C through CMake (the pybind11 cmake_example pattern).

Build switches, read from the environment (pip passes it on):
  DPCORE_CUDA=0        CPU-only even where nvcc exists; without nvcc the build is CPU-only anyway
                       and dpcore.build_info()["cuda"] says so.
  DPCORE_NATIVE=1      the CPU loops tuned for this machine (-march=native); the default is a
                       portable module, which build_info()["native"] ("") says.
  DPCORE_BUILD_TYPE    CMake's build type (Release).
"""
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name, source_dir="."):
        super().__init__(name, sources=[])
        self.source_dir = str(Path(source_dir).resolve())


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        ext_dir = Path(self.get_ext_fullpath(ext.name)).parent.resolve()
        build_dir = Path(self.build_temp) / ext.name
        build_dir.mkdir(parents=True, exist_ok=True)
        import pybind11

        config = os.environ.get("DPCORE_BUILD_TYPE", "Release")
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={ext_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DCMAKE_BUILD_TYPE={config}",
            f"-DDPCORE_CUDA={'OFF' if os.environ.get('DPCORE_CUDA', '1') == '0' else 'AUTO'}",
            f"-DDPCORE_NATIVE={'ON' if os.environ.get('DPCORE_NATIVE', '0') == '1' else 'OFF'}",
        ]
        try:
            import ninja  # noqa: F401  (the pip wheel puts ninja on PATH)
            args += ["-G", "Ninja"]
        except ImportError:
            pass
        subprocess.run(["cmake", ext.source_dir, *args], cwd=build_dir, check=True)
        subprocess.run(["cmake", "--build", ".", "--parallel", str(os.cpu_count() or 2)],
                       cwd=build_dir, check=True)


setup(ext_modules=[CMakeExtension("dpcore._C")], cmdclass={"build_ext": CMakeBuild})
