"""Reading a process's Prometheus `/metrics` in tests."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

from .waiting import until


class Scrape:
    """One scrape of a process's `/metrics`, parsed: `scrape.value(name, label=...)`."""

    def __init__(self, text: str) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        self.text = text
        self.samples = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        """The sample with exactly these labels, or None when the process does not report it."""
        return self.samples.get((name, frozenset(labels.items())))

    def number(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; the test fails when it is not reported."""
        found = self.value(name, **labels)
        assert found is not None, f"no sample {name}{labels}:\n{self.lines(name)}"
        return found

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include these (0 when none)."""
        wanted = set(labels.items())
        return sum(v for (n, have), v in self.samples.items() if n == name and wanted <= have)

    def lines(self, prefix: str) -> str:
        """The exposition lines that start with `prefix` (for failure messages)."""
        return "\n".join(line for line in self.text.splitlines() if line.startswith(prefix))


def scrape(where: int | str, token: str = "") -> Scrape:
    """Read a process's /metrics: `where` is its port on 127.0.0.1 or the page's URL (with
    the bearer token when it asks for one)."""
    url = where if isinstance(where, str) else f"http://127.0.0.1:{where}/metrics"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        return Scrape(response.read().decode())


def served_requests(service: str, method: str) -> float:
    """Requests of `method` (unary or streaming) that the services running in this
    process have started so far, e.g. `served_requests("messaging", "Read")`: their
    `grpc_server_started_total`, from this process's own registry."""
    from prometheus_client import REGISTRY

    labels = {
        "grpc_service": f"agentworks.{service}.v1.{service.capitalize()}Service",
        "grpc_method": method,
    }
    return sum(
        REGISTRY.get_sample_value("grpc_server_started_total", {"grpc_type": kind, **labels}) or 0.0
        for kind in ("unary", "server_stream", "client_stream", "bidi_stream")
    )


async def scrape_until(
    port: int,
    check: Callable[[Scrape], object],
    *,
    prefix: str = "agentworks_",
    timeout: float = 20.0,
) -> Scrape:
    """Scrape until `check(scrape)` holds; returns that scrape.

    Bounded polling: the gauges are refreshed in another process, so no event crosses
    the process boundary to wait on.
    """
    last: list[Scrape] = []

    async def look() -> Scrape | None:
        try:
            current = await asyncio.to_thread(scrape, port)
        except OSError:  # not listening yet (restarting)
            return None
        last[:] = [current]
        return current if check(current) else None

    try:
        return await until(look, timeout)  # type: ignore[no-any-return]
    except AssertionError:
        shown = last[0].lines(prefix) if last else "(no answer)"
        raise AssertionError(f"metrics did not reach the expected values:\n{shown}") from None
