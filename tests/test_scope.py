"""Profiled code is the rootdir's code, minus libraries; globs adjust it."""

import os
import sys

import pytest

from pytest_scalene.sampling.scope import CodeScope


def test_rootdir_files_are_profiled_relative(tmp_path):
    scope = CodeScope(tmp_path)
    assert scope.relative_name(str(tmp_path / "pkg" / "mod.py")) == "pkg/mod.py"


def test_libraries_and_outside_files_are_not(tmp_path):
    scope = CodeScope(tmp_path)
    assert scope.relative_name(os.__file__) is None
    assert scope.relative_name(pytest.__file__) is None
    assert scope.relative_name("<string>") is None
    assert scope.relative_name("/elsewhere/x.py") is None


def test_virtualenv_inside_rootdir_is_not_profiled():
    venv_file = os.path.join(sys.prefix, "lib", "x.py")
    scope = CodeScope(os.path.dirname(sys.prefix))
    assert scope.relative_name(venv_file) is None


def test_include_and_exclude_globs(tmp_path):
    scope = CodeScope(tmp_path, include=["/elsewhere/*"], exclude=["tests/slow_*"])
    assert scope.relative_name("/elsewhere/x.py") == "/elsewhere/x.py"
    assert scope.relative_name(str(tmp_path / "tests" / "slow_a.py")) is None
    assert scope.relative_name(str(tmp_path / "tests" / "fast_a.py")) == "tests/fast_a.py"


def test_locate_walks_out_of_library_frames(tmp_path):
    scope = CodeScope(os.path.dirname(__file__))
    frame = sys._getframe()
    key, first = scope.locate(frame)
    assert key.file == "test_scope.py" and key.function == "test_locate_walks_out_of_library_frames"
    assert first == frame.f_code.co_firstlineno


@pytest.mark.parametrize("name", ["stdlib", "platstdlib", "purelib", "platlib"])
def test_each_of_sysconfigs_library_paths_is_a_library_under_any_rootdir(name):
    # The scope finds the libraries without sysconfig (1.7 ms a session): each of its paths
    # is still a library where the project's rootdir contains it (a venv in the project, /).
    import sysconfig

    path = os.path.realpath(sysconfig.get_paths()[name])
    scope = CodeScope(os.path.dirname(path))
    assert scope.relative_name(os.path.join(path, "some_module.py")) is None
    assert CodeScope("/").relative_name(os.path.join(path, "some_module.py")) is None
