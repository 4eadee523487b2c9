"""Parameter counting, per component, for the parameter tables of the book.

Parameters shared between modules (tied embeddings) are counted once, under the first name
that holds them; the table notes where else they are used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torch import nn

__all__ = ["ComponentCount", "ParameterTable", "count_parameters"]

# "layers.N." at the start of the name (a bare Encoder) or after a dot (model.encoder)
_LAYER_INDEX = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@dataclass
class ComponentCount:
    """One row: ``name`` (``encoder.layers.*.self_attn``), ``count`` over ``repeats`` layers."""

    name: str
    count: int = 0
    repeats: int = 1
    shared_with: list[str] = field(default_factory=list)

    @property
    def per_layer(self) -> int:
        return self.count // self.repeats


@dataclass
class ParameterTable:
    """Per-component parameter counts; ``total`` counts each shared tensor once."""

    rows: list[ComponentCount]

    @property
    def total(self) -> int:
        return sum(row.count for row in self.rows)

    def to_dict(self) -> dict[str, int]:
        """``{component: count}`` in model order."""
        return {row.name: row.count for row in self.rows}

    def __int__(self) -> int:
        return self.total

    def __str__(self) -> str:
        width = max([len(row.name) for row in self.rows] + [len("total")])
        lines = [f"{'component':<{width}}  {'per layer':>12}  {'x':>3}  {'params':>12}  share"]
        for row in self.rows:
            note = f"  (also {', '.join(row.shared_with)})" if row.shared_with else ""
            lines.append(
                f"{row.name:<{width}}  {row.per_layer:>12,}  {row.repeats:>3}  {row.count:>12,}"
                f"  {row.count / max(self.total, 1):6.1%}{note}"
            )
        lines.append(f"{'total':<{width}}  {'':>12}  {'':>3}  {self.total:>12,}  100.0%")
        return "\n".join(lines)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> ParameterTable:
    """Count ``model``'s parameters per component; layers of a stack are grouped (``*``).

    A component is a direct child of the model, or, inside a stack of layers, a direct child of
    the layer (``encoder.layers.*.ffn``). Example: ``print(count_parameters(model))``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    rows: dict[str, ComponentCount] = {}
    layers_seen: dict[str, set[int]] = {}
    owner: dict[int, ComponentCount] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        if trainable_only and not parameter.requires_grad:
            continue
        component, index = _component(name)
        if id(parameter) in owner:  # a tied parameter: counted once, where first seen
            first = owner[id(parameter)]
            if component != first.name and component not in first.shared_with:
                first.shared_with.append(component)
            continue
        row = rows.setdefault(component, ComponentCount(component))
        owner[id(parameter)] = row
        row.count += parameter.numel()
        if index is not None:
            layers_seen.setdefault(component, set()).add(index)
    for component, indices in layers_seen.items():
        rows[component].repeats = len(indices)
    return ParameterTable(list(rows.values()))


def _component(name: str) -> tuple[str, int | None]:
    """``encoder.layers.3.ffn.linear1.weight`` -> (``encoder.layers.*.ffn``, 3)."""
    match = _LAYER_INDEX.search(name)
    if match is None:
        parts = name.split(".")
        return (parts[0] if len(parts) > 1 else name), None
    head = name[: match.start()]
    rest = name[match.end() :].split(".")
    child = rest[0] if len(rest) > 1 else ""
    component = (f"{head}." if head else "") + "layers.*" + (f".{child}" if child else "")
    return component, int(match.group(1))
