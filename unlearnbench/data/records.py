"""The item types DUSK-format and MUSE-format data share: a question with its
gold answer, and a verbatim prompt with the text that should (not) follow,
each with the cluster it belongs to where the data name one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answer: str
    cluster: str | None = None  # the document, person or source it is about: None, its own cluster


@dataclass(frozen=True)
class VerbatimItem:
    id: str
    prompt: str
    gt: str
    cluster: str | None = None  # the document or passage source it is cut from: None, its own cluster


def clusters_of(*item_lists) -> dict[str, str]:
    """item id -> cluster of every item that names one (`MetricResult.clusters`)."""
    return {item.id: item.cluster for items in item_lists for item in items if item.cluster is not None}


def record_cluster(record: dict) -> str | None:
    """A data record's `cluster` field as a string, or None where it has none
    (the zoo writes one; most published files do not)."""
    return None if record.get("cluster") is None else str(record["cluster"])
