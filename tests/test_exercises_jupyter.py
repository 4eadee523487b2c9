"""The exercise checker inside a real Jupyter kernel: an endless loop or ``sys.exit`` in a
student's answer gives a message, and the kernel keeps running the next cells."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

CELLS = [
    """\
import sys, time
from lecturekit.exercises import check, list_exercises

list_exercises()  # imports torch and the exercises before the clock starts


def forever(n, d, bytes_per_element):
    while True:
        pass


start = time.monotonic()
print("result", check("kernels.naive_attention_bytes", forever, time_limit=0.5))
print("within limit", time.monotonic() - start < 5)""",
    """\
def exits(n, d, bytes_per_element):
    sys.exit("bye")


print("result", check("kernels.naive_attention_bytes", exits))""",
    'print("kernel still alive")',
]


@pytest.mark.slow
def test_time_limit_and_exit_in_a_jupyter_kernel():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = [
        "".join(output.get("text", "") for output in cell.outputs) for cell in notebook.cells
    ]
    assert "运行超过 0.5 秒" in outputs[0] and "result False" in outputs[0], outputs[0]
    assert "within limit True" in outputs[0]
    assert "sys.exit()" in outputs[1] and "result False" in outputs[1], outputs[1]
    assert outputs[2] == "kernel still alive\n"
