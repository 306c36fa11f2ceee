"""The session's sandbox image: built once by build_image() (a no-op when it exists)."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from proctor.sandbox.docker.image import ImageInfo, build_image, docker_client


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[docker.DockerClient]:
    client = docker_client(timeout=600)
    yield client
    client.close()


@pytest.fixture(scope="session")
def built_image(docker_engine: docker.DockerClient) -> ImageInfo:
    # Idempotent: returns at once when the input-hash tag is present (CI builds it first).
    return build_image(client=docker_engine, log=lambda line: None)
