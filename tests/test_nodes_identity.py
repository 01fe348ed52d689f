"""Nodes that share a database are one Archive: they must not each mint a service IBI of their
own (each would then hold a membership of its own and announce a second Archive)."""

from serve_process import SAMPLE, run_command


def test_a_shared_database_without_a_service_ibi_is_refused_not_minted(tmp_path):
    state = tmp_path / "state"
    done = run_command(
        ["query", "8JMKD3MGP8W/35MMLL8", "--collection", str(SAMPLE), "--state-dir", str(state)],
        env={"ARCHIVE_SERVICE_DATABASE": "postgresql://archive@127.0.0.1:1/archive"},
    )
    assert done.returncode != 0, done
    assert "archiveserviceibi" in done.stderr and "database" in done.stderr, done.stderr
    assert not (state / "archiveserviceibi").exists()
