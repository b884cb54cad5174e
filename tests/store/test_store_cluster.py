"""A store holds one cluster's history: the first writer names it, a writer of another
cluster is refused, and so is a reader who names another cluster (``events --db X --cluster
Y`` used to list X's events as Y's). Without ``--cluster`` a reader reads the store's own."""

import asyncio
import json

import pytest

from fleetdeck.cli import main
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import Store, StoreError
from tests.store.test_store import fill

SINCE = ["--since", "2020-01-01T00:00"]


async def _written_by(path, cluster: str) -> None:
    """What a collector or console of ``cluster`` does to its store."""
    store = await Store.open(path, cluster=cluster, claim=True)
    try:
        await fill(store)
    finally:
        await store.close()


@pytest.fixture
def prod_db(tmp_path):
    path = tmp_path / "prod.db"
    asyncio.run(_written_by(path, "prod"))
    return path


def test_the_first_writer_names_the_cluster_and_another_writer_is_refused(prod_db):
    async def reopen(cluster: str) -> str | None:
        store = await Store.open(prod_db, cluster=cluster, claim=True)
        await store.close()
        return store.cluster

    assert asyncio.run(reopen("prod")) == "prod"
    with pytest.raises(StoreError, match="holds cluster 'prod', not 'lab'"):
        asyncio.run(reopen("lab"))


def test_a_session_of_another_cluster_cannot_write_into_the_store(prod_db):
    session = ConsoleSession("lab")  # never connects

    with pytest.raises(StoreError, match="pass --cluster prod"):
        asyncio.run(session.open_store(prod_db))


def test_a_store_made_before_it_named_its_cluster_takes_the_next_writers(tmp_path):
    async def run() -> tuple[str | None, str | None]:
        old = await Store.open(tmp_path / "old.db")
        await old.close()
        mine = await Store.open(tmp_path / "old.db", cluster="prod", claim=True)
        await mine.close()
        read = await Store.open(tmp_path / "old.db")
        await read.close()
        return old.cluster, read.cluster

    assert asyncio.run(run()) == (None, "prod")


@pytest.mark.parametrize("command", [["events"], ["report"], ["history", "gpu0001"]])
def test_a_reader_naming_another_cluster_is_refused_in_one_sentence(prod_db, command, capsys):
    assert main([*command, "--db", str(prod_db), "--cluster", "lab", *SINCE]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"the history store {prod_db} holds cluster 'prod', not 'lab'" in err


def test_a_reader_without_cluster_reads_the_stores_own_whatever_the_environment(
        prod_db, capsys, monkeypatch):
    monkeypatch.setenv("FLEETDECK_CLUSTER", "lab")
    assert main(["events", "--db", str(prod_db), *SINCE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["events", "--db", str(prod_db), "--cluster", "prod", *SINCE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
