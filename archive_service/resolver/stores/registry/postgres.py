"""The registry in the resolver's PostgreSQL `database` (several instances on one registry)."""

from __future__ import annotations

from contextlib import contextmanager

from ....common import postgres
from . import RegistryError


class PostgresRegistry:
    """The registry as the `resolver_archive` table of the shared PostgreSQL database
    (its schema: common/postgres.py SCHEMA["resolver"]); each call one transaction."""

    table, order = "resolver_archive", "seq"

    def __init__(self, url: str):
        self.url = url
        self.where = postgres.redacted(url)
        try:
            with self.session() as run:
                run("SELECT 1")
        except postgres.DatabaseError as exc:
            raise RegistryError(f"registry {exc}") from None

    def version(self) -> tuple:
        """What the included Archives are, in one round trip and a few numbers: their count
        and a sum of hashes of what an `ArchiveRef` holds, their IBIs, addresses and IPs
        (reading every row for every resolution was the registry's whole load). Without the
        IP, a new `archiveip` at the same address never reached the other instances: they
        judged the IBIps it names (`covers`) by the old one. Every row, with whether it is
        included and since when: summing the included ones only, a restart (excluded, included,
        excluded again) read as the exclusion before it, and an instance that had read that
        one kept its time, taking the owner for one away past its grace (`Registry.
        lately_excluded`; the twelfth adversarial pass)."""
        with postgres.autocommit(self.url) as conn:
            return tuple(
                conn.execute(
                    "SELECT count(*), coalesce(sum(hashtext(ibikey || ' ' || included || ' ' || "
                    "coalesce(since, '') || ' ' || coalesce(address, '') || ' ' || "
                    "coalesce(ip, '') || ' ' || coalesce(sends_from, ''))), 0) "
                    "FROM resolver_archive"
                ).fetchone()
            )

    @contextmanager
    def session(self):
        from psycopg.rows import dict_row

        with postgres.transaction(self.url) as conn, conn.cursor(row_factory=dict_row) as cur:

            def run(sql: str, params=()) -> list[dict]:
                cur.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description else []

            yield run
