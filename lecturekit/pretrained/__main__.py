"""``python -m lecturekit.pretrained [list | build [name ...]]``: list or (re)build recipes.

The capstone's sentence models train for hours, in pieces: ``python -m lecturekit.capstone``.
"""

from __future__ import annotations

import argparse
import sys

from lecturekit.pretrained import RECIPES, build, checkpoint_path, list_recipes
from lecturekit.pretrained.rnn import RNN_RECIPES, build_rnn, rnn_checkpoint_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturekit.pretrained", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the recipes")
    build_parser = sub.add_parser("build", help="train recipes from scratch and save them")
    build_parser.add_argument("names", nargs="*", help="recipes to build (default: all)")
    build_parser.add_argument("--progress", action="store_true", help="show progress bars")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, description in list_recipes().items():
            print(f"{name:24s} {description}")
        for name, recipe in RNN_RECIPES.items():
            print(f"{name:24s} {recipe.description}")
        return 0
    names = args.names or [*RECIPES, *RNN_RECIPES]
    known = sorted([*RECIPES, *RNN_RECIPES])
    for name in names:
        if name not in known:
            parser.error(f"unknown recipe {name!r}; known: {', '.join(known)}")
    for name in names:
        if name in RNN_RECIPES:
            _, meta = build_rnn(name)
            size = rnn_checkpoint_path(name).stat().st_size / 1e6
            print(
                f"{name}: {meta['train_seconds']} s, {size:.2f} MB -> {rnn_checkpoint_path(name)}"
            )
            continue
        ckpt = build(name, progress=args.progress)
        meta = ckpt.metadata
        size = checkpoint_path(name).stat().st_size / 1e6
        print(
            f"{name}: {meta['steps']} steps in {meta['train_seconds']} s, test exact match "
            f"{meta['test_exact_match']:.3f}, {size:.2f} MB -> {checkpoint_path(name)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
