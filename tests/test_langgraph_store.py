"""The reference as a LangGraph store beyond LangGraph's own tests (tests/peers/): a graph
compiled with `store=` remembers through it, users are isolated, a delete forgets the
audit values too, TTL sweeps go through the forgetting engine, and without the
`langgraph` extra the import error names it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system
from reference.langgraph_mapping import ITEM_CATEGORY, user_of_label
from reference.langgraph_store import ReferenceStore
from reference.ltm.filters import REDACTED, LtmFilter
from reference.settings import Settings

T0 = 1_767_225_600.0


@pytest.fixture
def store(clock: VirtualClock) -> ReferenceStore:
    system = build_memory_system(
        Settings(backend="memory"), clock=clock, embedder=HashingEmbedder()
    )
    return ReferenceStore(
        system,
        index={"dims": 384, "fields": ["text"]},  # the system's embedder
        ttl={"default_ttl": 60, "refresh_on_read": True},
    )


class Turn(TypedDict, total=False):
    user: str
    said: str
    recalled: list[str]


def remember(state: Turn, runtime: Runtime[Any]) -> dict[str, Any]:
    """Writes what the user said as a memory, through the runtime's store."""
    assert runtime.store is not None
    namespace = (state["user"], "memories")
    key = f"m{len(runtime.store.search(namespace, limit=100))}"
    runtime.store.put(namespace, key, {"text": state["said"]})
    return {}


def recall(state: Turn) -> dict[str, Any]:
    """Reads memories back by meaning, through `get_store()`."""
    hits = get_store().search((state["user"], "memories"), query=state["said"], limit=3)
    return {"recalled": [hit.value["text"] for hit in hits]}


def test_graph_writes_and_reads_memories_through_the_store(store: ReferenceStore) -> None:
    builder = StateGraph(Turn)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)

    graph.invoke({"user": "alice", "said": "my favourite tea is oolong"})
    graph.invoke({"user": "bob", "said": "I keep bees in the garden"})
    out = graph.invoke({"user": "alice", "said": "which tea do I like"})

    # What she just said (written first) and what she said before; bob's is not hers.
    assert out["recalled"] == ["which tea do I like", "my favourite tea is oolong"]
    # The memories are facts of each user in the reference's LTM.
    alice = store.ltm.facts(
        filter=LtmFilter(user_id="alice", categories=frozenset({ITEM_CATEGORY}))
    )
    assert sorted(f.value["value"]["text"] for f in alice) == [
        "my favourite tea is oolong",
        "which tea do I like",
    ]


def test_users_never_see_each_others_items(store: ReferenceStore) -> None:
    store.put(("u1", "notes"), "k", {"text": "u1's secret"})
    store.put(("u12", "notes"), "k", {"text": "u12's note"})
    store.put(("u 1", "notes"), "k", {"text": "a label that is no plain id"})
    assert [i.value for i in store.search(("u1",))] == [{"text": "u1's secret"}]
    assert [i.value for i in store.search(("u1",), query="secret")] == [{"text": "u1's secret"}]
    assert store.get(("u12", "notes"), "k").value == {"text": "u12's note"}  # type: ignore[union-attr]
    assert user_of_label("u 1") != user_of_label("u1")
    assert user_of_label("lg-7531") != "lg-7531"  # an encoded-looking label is encoded too
    assert store.list_namespaces(prefix=("u1",)) == [("u1", "notes")]


def test_delete_erases_the_item_and_its_audit_values(store: ReferenceStore) -> None:
    store.put(("carol", "profile"), "address", {"text": "12 Oak Street"})
    store.put(("carol", "profile"), "address", {"text": "3 Elm Road"})
    fact_ids = {e.fact_id for e in store.ltm.audit_log(user_id="carol")}
    store.delete(("carol", "profile"), "address")

    assert store.get(("carol", "profile"), "address") is None
    assert store.ltm.count(filter=LtmFilter(user_id="carol", include_dead=True)) == 0
    entries = [e for e in store.ltm.audit_log(user_id="carol") if e.fact_id in fact_ids]
    values = [v for e in entries for v in (e.old_value, e.new_value) if v is not None]
    assert values and all(v == REDACTED for v in values)
    assert "Oak" not in repr(entries) and "Elm" not in repr(entries)


def test_ttl_expiry_is_swept_by_the_forgetting_engine(
    store: ReferenceStore, clock: VirtualClock
) -> None:
    store.put(("dave",), "short", {"text": "expires soon"}, ttl=1)
    store.put(("dave",), "kept", {"text": "no expiry"}, ttl=None)
    clock.advance(59)
    assert store.get(("dave",), "short") is not None  # refreshed: 1 minute from now
    clock.advance(61)
    assert store.get(("dave",), "short") is None  # hidden at once, before any sweep
    assert store.sweep_ttl() == 1  # the engine removes it (and its vector fact)
    assert store.sweep_ttl() == 0
    everything = store.ltm.facts(filter=LtmFilter(user_id="dave", include_dead=True))
    items = [f.value["key"] for f in everything if f.category is ITEM_CATEGORY]
    assert items == ["kept"] and len(everything) == 2  # the item that stays + its vector


def test_bad_index_config_is_refused_by_field(clock: VirtualClock) -> None:
    system = build_memory_system(
        Settings(backend="memory"), clock=clock, embedder=HashingEmbedder()
    )
    with pytest.raises(ValueError, match=r"index\.dims"):
        ReferenceStore(system, index={"dims": 1536})
    with pytest.raises(ValueError, match=r"index\.distance_type"):
        ReferenceStore(system, index={"dims": 384, "distance_type": "l2"})  # type: ignore[typeddict-unknown-key]


def test_without_the_extra_the_import_error_names_it() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["langgraph"] = None  # as if the extra were not installed
        try:
            import reference.langgraph_store
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install -e '.[langgraph]'" in out
    assert "optional extra 'langgraph'" in out


def test_query_search_ranks_more_than_a_thousand_fields_of_one_user(
    store: ReferenceStore,
) -> None:
    for i in range(1001):
        store.put(("erin", "notes"), f"n{i}", {"text": f"note number {i}"})
    store.put(("erin", "notes"), "tea", {"text": "green tea with jasmine"})
    hits = store.search(("erin",), query="green tea with jasmine", limit=2)
    assert hits[0].key == "tea"
    assert len(store.search(("erin",), query="note", limit=2000)) == 1002


def test_bad_values_are_refused_by_field_and_write_nothing(store: ReferenceStore) -> None:
    from reference.errors import InvalidInput

    with pytest.raises(InvalidInput, match="value"):
        store.put(("frank",), "k", {"when": object()})
    with pytest.raises(InvalidInput, match=r"value\.text"):
        store.put(("frank",), "k", {"text": "x" * 9_000})  # over MAX_TEXT_CHARS
    with pytest.raises(ValueError, match="ttl"):
        store.put(("frank",), "k", {"text": "ok"}, ttl=-1)
    assert store.ltm.count(filter=LtmFilter(user_id="frank", include_dead=True)) == 0
    assert store.ltm.audit_log(user_id="frank") == []


def test_facts_the_reference_wrote_itself_are_not_items(store: ReferenceStore) -> None:
    for category in ("knowledge", "entity"):  # the categories the store's facts use
        store.ltm.upsert(
            user_id="gina", category=category, key="topic", value={"value": "x"}, text="tea"
        )
    store.put(("gina", "notes"), "k", {"text": "tea time"})
    assert [i.key for i in store.search(("gina",))] == ["k"]
    assert [i.key for i in store.search(("gina",), query="tea")] == ["k"]
    assert [i.key for i in store.search((), query="tea")] == ["k"]
    assert store.list_namespaces() == [("gina", "notes")]
