"""A worker started after its state directory turned read-only (a remount, a full disk turned
read-only by the kernel) still answers from the index it finds there."""

from pathlib import Path

from archive_service.web import create_app
from support import SERVICE, Client


def test_a_new_worker_on_a_read_only_state_dir_answers(settings, read_only):
    create_app(settings)  # builds the index, as the first start does; its writer closes
    read_only(Path(settings["state_dir"]))
    client = Client(create_app(settings), "")  # a worker started (or restarted) now
    answer = client.get(
        f"/{SERVICE}?servicesubject=urlRequest&clientinformation.ipaddress=127.0.0.1"
        "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8",
        status=200,
    )
    assert "url http://" in answer.text, answer.text
    assert client.get("/", status=200).html.find("main") is not None
    assert client.get(f"/{SERVICE}/items", status=200)
