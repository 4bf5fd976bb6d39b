"""JUnit XML for CI, the one writer: a run is one test case, a campaign one case per run (docs/architecture.md §7).
Built with ElementTree so names and failure texts from the run are escaped by the XML library."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    name: str
    classname: str
    failure: str | None = None  # the failure's text (None: passed)
    failure_message: str = ""
    skipped: str | None = None  # why it did not run (None: it ran)


def write_junit(path: Path, suite: str, cases: list[Case]) -> Path:
    root = ET.Element("testsuite", name=suite, tests=str(len(cases)),
                      failures=str(sum(c.failure is not None for c in cases)),
                      skipped=str(sum(c.skipped is not None for c in cases)))
    for c in cases:
        case = ET.SubElement(root, "testcase", classname=c.classname, name=c.name)
        if c.failure is not None:
            ET.SubElement(case, "failure", message=c.failure_message).text = c.failure
        elif c.skipped is not None:
            ET.SubElement(case, "skipped", message=c.skipped)
    tmp = path.with_suffix(path.suffix + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
    return path
