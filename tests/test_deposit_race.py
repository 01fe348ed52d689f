"""A depositor who changes an upload while the admin deposits it (issue 30, tenth
adversarial pass): the file checked is the file copied, or nothing is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from test_deposit import deposit_args, run

# An audit hook cannot be removed: this one acts only while `_swap` names an upload, and
# then at the first open of it, which is the copy's (checked_sources only stats it): the
# moment a depositor's rename loop wins.
_swap: dict[str, Path] = {}


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _swap and args and isinstance(args[0], (str, Path)):
        upload = _swap["upload"]
        if os.path.basename(os.fspath(args[0])) == upload.name:
            link = upload.with_name(".link")
            link.symlink_to(_swap.pop("target"))
            os.replace(link, upload)


sys.addaudithook(_audit)


def test_a_link_swapped_in_after_the_check_is_not_followed(capsys, settings, collection, tmp_path):
    """Before, a deposit's copy followed it: urlkey.secret in a public item's doc/ (a rename
    loop beside `archive-service deposit` won 9 of 30 deposits)."""
    secret = Path(settings["state_dir"]) / "urlkey.secret"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_bytes(b"the Archive's secret")
    upload = tmp_path / "upload" / "thesis.pdf"
    upload.parent.mkdir()
    upload.write_bytes(b"%PDF-1.4 a thesis")
    _swap.update(upload=upload, target=secret)
    try:
        code, _, err = run(capsys, *deposit_args(settings, upload))
    finally:
        _swap.clear()
    copied = [p.read_bytes() for p in collection.rglob("thesis.pdf")]
    assert b"the Archive's secret" not in copied
    assert code == 1 and f"{upload}: " in err and "not copied" in err, err
