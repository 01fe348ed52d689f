"""The urlkey secret in the PostgreSQL database every node shares (`urlkey_secret`, one row;
schema in common/postgres.py)."""

from __future__ import annotations

import secrets

from ...protocol.urlkeys import SECRET_BYTES


def load_shared_secret(database: str) -> bytes:
    """The secret in the PostgreSQL `database` (table `urlkey_secret`), made by whichever node
    comes first: every node offers a random one, the primary key keeps the first committed and
    the others read it back (a concurrent offer waits for that commit, then inserts nothing)."""
    import psycopg

    from ...common import postgres

    try:
        with postgres.transaction(database) as conn:
            conn.execute(
                "INSERT INTO urlkey_secret (id, secret) VALUES (1, %s) ON CONFLICT DO NOTHING",
                (secrets.token_bytes(SECRET_BYTES),),
            )
            (secret,) = conn.execute("SELECT secret FROM urlkey_secret WHERE id = 1").fetchone()
    except psycopg.Error as exc:
        where = postgres.redacted(database)
        raise postgres.DatabaseError(f"database {where}: {str(exc).strip()}") from None
    if len(secret) < SECRET_BYTES:
        where = postgres.redacted(database)
        raise postgres.DatabaseError(
            f"database {where}: urlkey_secret holds {len(secret)} bytes, not {SECRET_BYTES}"
        )
    return bytes(secret)
