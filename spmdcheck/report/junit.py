"""`junit`: JUnit XML, one test suite per file with findings and one failed test case per finding.

XML 1.0 cannot hold most control characters, not even escaped: text from the checked files (names,
messages quoting code) goes through `printable`, so a file name with ESC or a newline still gives a
well-formed report.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from collections import Counter
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, display_path
from spmdcheck.report.printable import printable


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    diags = [d for d in diags if d.severity != "note"]  # a note (reveal_spmd_type) is not a failed test
    root = ET.Element("testsuites", name="spmdcheck", tests=str(max(1, len(diags))), failures=str(len(diags)))
    if not diags:
        suite = ET.SubElement(root, "testsuite", name="spmdcheck", tests="1", failures="0", errors="0")
        ET.SubElement(suite, "testcase", name="spmdcheck", classname="spmdcheck")
    for path, group in itertools.groupby(diags, key=lambda d: d.path):
        found = list(group)
        shown = printable(display_path(path))
        suite = ET.SubElement(
            root, "testsuite", name=shown, tests=str(len(found)), failures=str(len(found)), errors="0"
        )
        names: Counter[str] = Counter()
        for d in found:
            # a test's name is its identity in CI dashboards: two findings of one file never share one
            name = f"{d.code} {d.name} at {d.line}:{d.column}"
            names[name] += 1
            if names[name] > 1:
                name += f" ({names[name]})"
            case = ET.SubElement(suite, "testcase", name=name, classname=shown, file=shown, line=str(d.line))
            message = printable(d.message)
            failure = ET.SubElement(case, "failure", message=message, type=d.code)
            failure.text = f"{shown}:{d.line}:{d.column}: {d.code} [{d.name}] {message}"
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")
