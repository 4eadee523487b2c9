"""Print which notebooks nbval ran, how many cells of each passed and how long each took (from
its JUnit XML; the times are the cells' own, run side by side when nbval ran in parallel).

Usage: nbval_summary.py JUNIT_XML [LABEL]; LABEL names the pass (e.g. "AVX2, one thread").
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter


def main(path: str, label: str = "") -> int:
    cells: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        # classname is the dotted path: "notebooks.00_setup.ipynb"
        notebook = case.get("classname", "?").removesuffix(".ipynb").replace(".", "/") + ".ipynb"
        cells[notebook] += 1
        seconds[notebook] += float(case.get("time", 0))
        if case.find("failure") is not None or case.find("error") is not None:
            failed[notebook] += 1
    where = f" ({label})" if label else ""
    print(f"nbval{where} ran {len(cells)} notebooks:")
    for notebook in sorted(cells):
        passed = cells[notebook] - failed[notebook]
        print(f"  {notebook}: {passed}/{cells[notebook]} cells passed, {seconds[notebook]:.0f} s")
    return 0 if cells else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
