"""The Item Report names its items (issue 34, point 1): Item is `dc:title` (the IBI when
none), Publisher `dc:publisher`, YOP the year of `dc:date`, Data_Type `dc:type` mapped onto
R5.1's list, Item_ID the persistent URL as URI and the IBI as Proprietary_ID; in the COUNTER
API and in `archive-service stats --report ir` alike."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from archive_service import cli
from archive_service.stores.stats import counter
from archive_service.web import create_app
from support import ITEM_A, ITEM_B, SERVICE, Client, record_month_of_uses

RESOLVER = "https://purl.example.net/J8LNKB5R7W/3FUQHC5"
SIDECAR = """\
timestamp: "2026-01-01T00:00:00Z"
dc:
  title: [Relatório anual de atividades]
  creator: [Silva, Ana]
  publisher: [Instituto Nacional de Pesquisas Espaciais]
  date: [2019-05-02]
  type: [Relatório técnico]
"""


@pytest.mark.parametrize(
    "types, expected",
    [
        ([], "Unspecified"),
        (["Article"], "Article"),
        (["info:eu-repo/semantics/doctoralThesis"], "Thesis_or_Dissertation"),
        (["Dissertação (Mestrado em Meteorologia)"], "Thesis_or_Dissertation"),
        (["Conference paper"], "Conference_Item"),
        (["Artigo em Evento (Congresso)"], "Conference_Item"),
        (["Capítulo de livro"], "Book_Segment"),
        (["Livro"], "Book"),
        (["RELATÓRIO"], "Report"),
        (["Dataset"], "Dataset"),
        (["StillImage"], "Image"),
        (["Software"], "Software"),
        (["Mapa temático"], "Image"),
        (["Lecture notes"], "Other"),
    ],
)
def test_dc_type_maps_onto_the_codes_data_types(types, expected):
    assert counter.data_type(types) == expected


@pytest.mark.parametrize(
    "dates, year",
    [([], "0001"), (["2019-05-02"], "2019"), (["n.d.", "2003"], "2003"), (["0099-01-01"], "0001")],
)
def test_the_year_of_publication_is_the_first_dated_year(dates, year):
    assert counter.year_of_publication(dates) == year


@pytest.fixture
def described(settings, collection: Path) -> dict:
    item = collection / ITEM_A
    (item / "doc").mkdir(parents=True)
    (item / "doc" / "relatorio.pdf").write_bytes(b"%PDF-1.4\n")
    (item / "item.yaml").write_text(SIDECAR, encoding="utf-8")
    settings = {**settings, "resolver": RESOLVER, "stats_retention_days": 0}
    record_month_of_uses(Path(settings["state_dir"]))
    return settings


def test_the_counter_api_names_and_describes_each_item(described):
    client = Client(create_app(described), "")
    report = client.get(
        f"/{SERVICE}/r51/reports/ir",
        params={"customer_id": "anyone", "begin_date": "2026-01", "end_date": "2026-01"},
        status=200,
    ).json
    items = {i["Item_ID"]["Proprietary"]: i for i in report["Report_Items"][0]["Items"]}
    a = items[f"{SERVICE}:{ITEM_A}"]
    assert a["Item"] == "Relatório anual de atividades"
    assert a["Publisher"] == "Instituto Nacional de Pesquisas Espaciais"
    assert a["Item_ID"]["URI"] == f"https://purl.example.net/{ITEM_A}"
    (attributes,) = a["Attribute_Performance"]
    assert (attributes["YOP"], attributes["Data_Type"]) == ("2019", "Report")
    b = items[f"{SERVICE}:{ITEM_B}"]  # used, but not in this collection (any more): its IBI
    assert (b["Item"], b["Publisher"]) == (ITEM_B, "")  # and its URL, persistent as it is
    assert b["Item_ID"]["URI"] == f"https://purl.example.net/{ITEM_B}"
    assert b["Attribute_Performance"][0]["Data_Type"] == "Unspecified"


def test_the_tabular_report_of_the_command_line_says_the_same(described, capsys):
    create_app(described)  # builds the collection's index, as serve would
    argv = ["stats", "--report", "ir", "--begin", "2026-01", "--state-dir"]
    argv += [described["state_dir"], "--archiveserviceibi", SERVICE]
    argv += ["--collection", described["collection"], "--resolver", RESOLVER]
    assert cli.main(argv) == 0
    table = list(csv.reader(io.StringIO(capsys.readouterr().out), delimiter="\t"))
    columns = table[14]
    rows = [dict(zip(columns, row)) for row in table[15:]]
    a = next(r for r in rows if r["Proprietary_ID"] == f"{SERVICE}:{ITEM_A}")
    assert a["Item"] == "Relatório anual de atividades"
    assert (a["Publisher"], a["YOP"], a["Data_Type"]) == (
        "Instituto Nacional de Pesquisas Espaciais",
        "2019",
        "Report",
    )
    assert a["URI"] == f"https://purl.example.net/{ITEM_A}"


def test_without_a_collection_the_command_line_names_items_by_ibi_and_says_so(described, capsys):
    argv = ["stats", "--report", "ir", "--begin", "2026-01", "--state-dir"]
    assert cli.main([*argv, described["state_dir"], "--archiveserviceibi", SERVICE]) == 0
    out, err = capsys.readouterr()
    assert "items are named by their IBI" in err
    assert f"\n{ITEM_A}\t" in out
