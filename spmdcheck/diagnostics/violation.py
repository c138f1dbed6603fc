"""What every violation is: one class per code (ruff's `Violation`), defined in diagnostics/violations/.

A violation holds what was found (its typed fields) and builds the finding's text from them: `message`
is the one place a code's words are written, and `fix_title` names the fix a suggestion applies. The
analysis that detects the problem fills the fields and hands the object over; it never writes text.

Each class names its code; the code's entry in codes.py gives its name and severity and its page in
pages/ documents it. A class naming a code codes.py does not list fails at import.

`{site:N}` in a message is a placeholder the renderer replaces with `line L` of site N.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from importlib import resources
from typing import Any, ClassVar, dataclass_transform

from spmdcheck.diagnostics.codes import CODES, Code


@dataclass_transform(eq_default=True, frozen_default=True)  # type checkers read subclasses as dataclasses
class Violation:
    """One problem of one code: subclasses are immutable records of the problem's facts.

    A subclass declares its fields as annotations (a default as the class attribute), as a dataclass does,
    and gets a dataclass's frozen behaviour: keyword or positional construction, equality, hashing and a
    repr over the fields, and an error on assignment. They are built here once for every violation, not
    compiled per class: the forty-odd classes are imported by every run, and a frozen dataclass compiles
    six functions each (a fifth of the warm path's own import time).
    """

    code: ClassVar[str] = ""  # set by each concrete violation; a family base leaves it empty
    _fields: ClassVar[tuple[str, ...]] = ()  # every field, a base's first (as a dataclass orders them)
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code and cls.code not in CODES:
            raise TypeError(f"{cls.__name__} names {cls.code}, which diagnostics/codes.py does not list")
        # (annotations are strings here: every violation module has `from __future__ import annotations`)
        own = [n for n, a in cls.__dict__.get("__annotations__", {}).items() if not str(a).startswith("ClassVar")]
        cls._fields = tuple(dict.fromkeys([*cls._fields, *own]))
        defaults = dict(cls._defaults)
        for name in own:
            if name in cls.__dict__:
                defaults[name] = cls.__dict__[name]
            else:
                defaults.pop(name, None)
        cls._defaults = defaults
        has_default = [name in defaults for name in cls._fields]
        if True in has_default and False in has_default[has_default.index(True) :]:
            raise TypeError(f"{cls.__name__}: a field without a default follows one with a default")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, {len(args)} given")
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name not in fields or name in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {name!r}")
            values[name] = value
        for name in fields:
            if name in values:
                object.__setattr__(self, name, values[name])
            elif name in self._defaults:
                object.__setattr__(self, name, self._defaults[name])
            else:
                raise TypeError(f"{type(self).__name__}() missing argument {name!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self._values()))
        return f"{type(self).__name__}({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    @classmethod
    def info(cls) -> Code:
        """The code's entry: name, severity, summary."""
        return CODES[cls.code]

    @classmethod
    def page_name(cls) -> str:
        """The page documenting the code, relative to the diagnostics package."""
        return f"pages/{cls.code}.md"

    @classmethod
    def has_page(cls) -> bool:
        return resources.files(__package__).joinpath(cls.page_name()).is_file()

    @property
    def name(self) -> str:
        return self.info().name

    @property
    def severity(self) -> str:
        return self.info().severity

    @property
    def message(self) -> str:
        raise NotImplementedError

    @property
    def fix_title(self) -> str | None:
        """The title of the suggestion that fixes this violation; None when there is no single fix."""
        return None


def on_axis(axis: str | None) -> str:
    """`on axis 'tp' ` (with its trailing space), or nothing when the axis is not known."""
    return f"on axis {axis!r} " if axis else ""


def site(ref: int) -> str:
    """The placeholder the renderer replaces with the line of site `ref`."""
    return f"{{site:{ref}}}"


def operand_list(operands: tuple[tuple[str, str], ...]) -> str:
    """`x`: V, `w`: S(0): each operand's source text with its type on the axis."""
    return ", ".join(f"`{text}`: {kind}" for text, kind in operands)
