"""`archive-service init [DIR]`: a commented settings file with every setting, private, never
overwritten; it loads back as it is (issue 18)."""

from __future__ import annotations

import stat
import warnings

import yaml

from archive_service import settings
from archive_service.cli import main


def test_init_writes_every_setting_privately_and_loads_back(tmp_path, capsys):
    target = tmp_path / "etc"
    assert main(["init", str(target)]) == 0
    path = target / "archive-service.yaml"
    assert str(path) in capsys.readouterr().out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    words = " ".join(word for word in text.split() if word != "#")
    for setting in settings.SETTINGS:
        assert f"{setting.name}:" in text, setting.name
        assert setting.help.split(";")[0][:40] in words, setting.name
    # Secrets are never written as values: the file points at a file holding the key.
    data = yaml.safe_load(text) or {}
    assert not data.get("registrationkey")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no unknown key, no exposed secret
        loaded = settings.load(str(path), {}, {})
    # The state dir is named in the file, so every command run with it uses the same one.
    assert data["state_dir"] == loaded.state_dir == settings.default_state_dir()


def test_init_with_a_collection_is_ready_to_serve(tmp_path, capsys):
    collection = tmp_path / "col"
    collection.mkdir()
    assert main(["init", str(tmp_path), "--collection", str(collection)]) == 0
    loaded = settings.load(str(tmp_path / "archive-service.yaml"), {}, {})
    assert loaded.collection == str(collection)


def test_init_never_overwrites(tmp_path, capsys):
    path = tmp_path / "archive-service.yaml"
    path.write_text("collection: /mine\n")
    assert main(["init", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert path.read_text() == "collection: /mine\n"
