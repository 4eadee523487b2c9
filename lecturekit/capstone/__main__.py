"""``python -m lecturekit.capstone [list | build name ...]``: list or train the capstone's
sentence models, in resumable pieces (``--max-minutes``; run the same command again to go on)."""

from __future__ import annotations

import argparse
import sys

from lecturekit.capstone.models import SENTENCE_RECIPES, train_sentences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturekit.capstone", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the sentence-model recipes")
    build_parser = sub.add_parser("build", help="train recipes for one piece and ship them")
    build_parser.add_argument("names", nargs="+", help="recipes to train")
    build_parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop after this many minutes (resume with the same command)",
    )
    build_parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for name, recipe in SENTENCE_RECIPES.items():
            print(f"{name:24s} {recipe.description}")
        return 0
    for name in args.names:
        if name not in SENTENCE_RECIPES:
            parser.error(f"unknown recipe {name!r}; known: {', '.join(sorted(SENTENCE_RECIPES))}")
    for name in args.names:
        done = train_sentences(name, max_minutes=args.max_minutes, threads=args.threads)
        cer = done["history"]["valid_cer"][-1:] or ["-"]
        print(
            f"{name}: step {done['step']}/{SENTENCE_RECIPES[name].total_steps} after "
            f"{done['seconds']:.0f} s in all, validation CER {cer[0]}, "
            f"{'finished' if done['finished'] else 'not finished: run the same command again'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
