"""Issue #28 for ``lecturekit.pretrained``: every shipped file carries a checksum that a single
flipped weight byte breaks, and a recipe name of the wrong type is named."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import torch

import lecturekit.pretrained as pretrained
from lecturekit.capstone import models as sentence_models
from lecturekit.pretrained import rnn
from lecturekit.training.checkpoint import _checksum

SHIPPED = sorted(Path(pretrained.__file__).parent.glob("*.pt"))


def _flip_a_weight_byte(path: Path) -> None:
    """Flip one byte in the middle of the largest tensor record of the torch zip file (the
    zip's own CRCs are not checked by torch.load, so only the checksum can notice)."""
    with zipfile.ZipFile(path) as archive:
        record = max(
            (i for i in archive.infolist() if "/data/" in i.filename), key=lambda i: i.file_size
        )
        with open(path, "rb") as f:
            f.seek(record.header_offset + 26)
            name_len, extra_len = (
                int.from_bytes(f.read(2), "little"),
                int.from_bytes(f.read(2), "little"),
            )
    offset = record.header_offset + 30 + name_len + extra_len + record.file_size // 2
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def test_every_transformer_and_rnn_file_is_shipped() -> None:
    names = {p.stem for p in SHIPPED}
    assert names >= {"reverse-tiny", "translation-small"} | set(rnn.RNN_RECIPES)
    assert names >= {
        name for name in pretrained.RECIPES if pretrained.checkpoint_path(name).is_file()
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_file_has_a_valid_checksum(path) -> None:
    payload = torch.load(path, weights_only=True, map_location="cpu")
    assert isinstance(payload.get("checksum"), str)
    assert payload["checksum"] == _checksum(payload)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_flipped_byte_in_a_shipped_file_is_refused(path, tmp_path, monkeypatch) -> None:
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    _flip_a_weight_byte(copy)
    assert copy.read_bytes() != path.read_bytes()
    if path.stem in rnn.RNN_RECIPES:
        monkeypatch.setattr(rnn, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            rnn.load_rnn(path.stem)
    elif path.stem in sentence_models.SENTENCE_RECIPES:
        monkeypatch.setattr(sentence_models, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            sentence_models.load_sentence_model(path.stem)
    else:
        monkeypatch.setattr(pretrained, "DATA_DIR", tmp_path)
        with pytest.raises(ValueError, match="fails its checksum"):
            pretrained.load(path.stem)


@pytest.mark.parametrize("name", [["reverse-tiny"], None, 3])
def test_a_recipe_name_of_the_wrong_type_is_named(name) -> None:
    with pytest.raises(TypeError, match="name must be a recipe name"):
        pretrained.load(name)
    with pytest.raises(ValueError, match="name must be one of"):
        rnn.load_rnn(name)
