"""What every violation is: one class per code (ruff's `Violation`), defined in diagnostics/violations/.

A violation holds what was found (its typed fields) and builds the finding's text from them: `message`
is the one place a code's words are written, and `fix_title` names the fix a suggestion applies. The
analysis that detects the problem fills the fields and hands the object over; it never writes text.

Each class names its code; the code's entry in codes.py gives its name and severity and its page in
pages/ documents it. A class naming a code codes.py does not list fails at import.

`{site:N}` in a message is a placeholder the renderer replaces with `line L` of site N.
"""

from __future__ import annotations

from importlib import resources
from typing import ClassVar

from spmdcheck.diagnostics.codes import CODES, Code


class Violation:
    """One problem of one code: subclasses are frozen dataclasses of the problem's facts."""

    code: ClassVar[str] = ""  # set by each concrete violation; a family base leaves it empty

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.code and cls.code not in CODES:
            raise TypeError(f"{cls.__name__} names {cls.code}, which diagnostics/codes.py does not list")

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
