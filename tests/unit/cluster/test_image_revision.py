"""An engine holding a Kafka image of an older images/kafka rebuilds it; one of the current revision is kept."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_chaos.cluster import images


class FakeImages:
    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels

    def get(self, tag: str) -> Any:
        return SimpleNamespace(labels=self.labels)


class Rebuilt(Exception):
    pass


def refuse_build(version: str, log: Any) -> Any:
    raise Rebuilt(version)


@pytest.mark.parametrize("labels", [{}, {images.REVISION_LABEL: "1"}])
def test_an_image_of_an_older_revision_is_rebuilt(monkeypatch: pytest.MonkeyPatch, labels: dict[str, str]) -> None:
    monkeypatch.setattr(images, "resolve_kafka_libs", refuse_build)
    client: Any = SimpleNamespace(images=FakeImages(labels))
    with pytest.raises(Rebuilt):
        images.build_kafka(client, images.DEFAULT_KAFKA_VERSION, lambda _: None)


def test_an_image_of_the_current_revision_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "resolve_kafka_libs", refuse_build)
    client: Any = SimpleNamespace(images=FakeImages({images.REVISION_LABEL: images.KAFKA_IMAGE_REVISION}))
    logged: list[str] = []
    assert images.build_kafka(client, images.DEFAULT_KAFKA_VERSION, logged.append) == images.kafka_image()
    assert logged == [f"{images.kafka_image()}: present"]
