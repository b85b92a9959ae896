"""The plugin registries: built-in students (`selfimprove.students`) and default teachers
(`selfimprove.teachers`), both read from entry points, so the core names neither the
arithmetic student nor the embedded env's teacher."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from selfimprove.commands.run import default_teacher
from selfimprove.errors import ConfigError, UsageError
from selfimprove.rl import builtin_students
from selfimprove.rl.builtin_students import BuiltinStudent

TINY = "selfimprove/tiny-arith"
PLUGIN = '''
from pathlib import Path
from selfimprove.rl.builtin_students import BuiltinStudent

STUDENT = BuiltinStudent(id="selfimprove/plugin-student", resolve=lambda log: Path({where!r}),
                         on_disk=lambda: Path({where!r}))
WRONG_ID = BuiltinStudent(id="selfimprove/other", resolve=lambda log: Path("."), on_disk=lambda: None)
TEACHER = "plugin_teacher.py:Teacher"
NOT_A_SPEC = 42
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package on sys.path whose entry points are added beside the installed ones; returns add(group, name, attr)."""
    (tmp_path / "si_test_plugin.py").write_text(PLUGIN.format(where=str(tmp_path)))
    monkeypatch.syspath_prepend(str(tmp_path))
    real = importlib.metadata.entry_points
    extra: list[importlib.metadata.EntryPoint] = []

    def entry_points(group: str):
        return [*real(group=group), *(ep for ep in extra if ep.group == group)]

    def add(group: str, name: str, attr: str) -> None:
        extra.append(importlib.metadata.EntryPoint(name=name, value=f"si_test_plugin:{attr}", group=group))

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    builtin_students.registered.cache_clear()
    yield add
    builtin_students.registered.cache_clear()


def test_the_shipped_students_are_registered_with_their_extras():
    assert builtin_students.ids() == ["selfimprove/smollm2-135m", TINY]
    tiny = builtin_students.get(TINY)
    assert [e.what for e in tiny.extras] == ["the `local` extra"] and tiny.maker is not None
    assert tiny.on_disk() is not None and (tiny.on_disk() / "config.json").is_file()
    assert builtin_students.get("selfimprove/smollm2-135m").maker is None  # converted, not made from a recipe


def test_a_registered_id_resolves_through_the_registry(plugin, tmp_path: Path):
    """resolve_model, bootstrap's check and the orchestrator's limits all ask the registry."""
    from selfimprove.phases.bootstrap import check_model
    from selfimprove.rl.student import resolve_model
    from selfimprove.student_limits import model_dir

    plugin(builtin_students.GROUP, "selfimprove/plugin-student", "STUDENT")
    assert resolve_model("selfimprove/plugin-student", log=lambda s: None) == tmp_path
    assert check_model("selfimprove/plugin-student", "local") == "selfimprove/plugin-student"
    assert model_dir("selfimprove/plugin-student") == tmp_path


def test_an_unknown_id_lists_the_registered_ones(plugin):
    from selfimprove.phases.bootstrap import check_model
    from selfimprove.rl.student import resolve_model

    plugin(builtin_students.GROUP, "selfimprove/plugin-student", "STUDENT")
    listed = "selfimprove/plugin-student, selfimprove/smollm2-135m, selfimprove/tiny-arith"
    with pytest.raises(ConfigError, match=f"'selfimprove/nope': no such built-in student; built-in: {listed} "):
        builtin_students.get("selfimprove/nope")
    with pytest.raises(ConfigError, match=f"not a built-in id \\({listed}\\)"):
        resolve_model("selfimprove/nope")
    with pytest.raises(UsageError, match=f"no such built-in student; built-in: {listed}$"):
        check_model("selfimprove/nope", "local")


@pytest.mark.parametrize("attr, words", [("WRONG_ID", "not a BuiltinStudent with id"),
                                         ("NO_SUCH_ATTR", "cannot load it (AttributeError")])
def test_a_broken_registration_is_one_line_naming_the_entry_point(plugin, attr: str, words: str):
    plugin(builtin_students.GROUP, "selfimprove/plugin-student", attr)
    with pytest.raises(ConfigError) as e:
        builtin_students.ids()
    assert str(e.value).startswith("entry point selfimprove.students 'selfimprove/plugin-student' = si_test_plugin:")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_registered_objects_are_what_the_core_expects():
    assert all(isinstance(s, BuiltinStudent) and s.id == i for i, s in builtin_students.registered().items())


# ---------------------------------------------------------------- default teachers


def test_the_embedded_env_declares_its_default_teacher():
    from selfimprove.teacher import load_teacher

    spec = default_teacher("selfimprove-arith")
    assert spec == "examples/arith_teacher.py:ArithTeacher"
    assert default_teacher("someone/selfimprove-arith") == spec  # a hub copy of the env: its name after owner/
    assert callable(load_teacher(spec))


def test_an_env_package_registers_its_own_teacher(plugin):
    plugin("selfimprove.teachers", "my-env", "TEACHER")
    assert default_teacher("my-env") == "plugin_teacher.py:Teacher"


def test_an_env_without_a_teacher_is_told_what_to_do(plugin):
    plugin("selfimprove.teachers", "my-env", "TEACHER")
    with pytest.raises(UsageError) as e:
        default_teacher("gsm8k")
    msg = str(e.value)
    assert msg.startswith("--teacher: no teacher for 'gsm8k'.") and "write(ctx)" in msg and "--teacher path" in msg
    assert "--teacher llm:MODEL" in msg  # the built-in teacher for any env
    assert ("(plugin_teacher.py:Teacher for my-env; examples/arith_teacher.py:ArithTeacher for selfimprove-arith)"
            in msg)


def test_a_teacher_entry_point_that_is_not_a_spec_is_refused(plugin):
    plugin("selfimprove.teachers", "my-env", "NOT_A_SPEC")
    with pytest.raises(UsageError, match=r"^entry point selfimprove.teachers 'my-env' = si_test_plugin:NOT_A_SPEC: "
                                         r"a int, not a --teacher spec string"):
        default_teacher("my-env")
