"""The reliability report (docs/reliability.md) for the cross-service tests.

The services in-process (`start_messaging`, `start_functions`, `start_scheduler`) come from
the root conftest's plugin `tests.fixtures.services`.

Reliability tests carry `@pytest.mark.reliability(scenario=..., action=..., check=...)`
(registered by the `agentworks.server.testing` plugin, so every package may use it). A
module may instead set `RELIABILITY = {"scenario": ..., "action": ..., "check": ...,
"test": <the test function it describes>}`. With
`AGENTWORKS_WRITE_RELIABILITY=1` the session records the outcome of every such test and
writes docs/reliability.md at the end (`make reliability`); otherwise nothing is written,
so `make test` leaves the tree clean. A module may define `RELIABILITY_APPENDIX()`
returning markdown (e.g. the access matrix) to print under the table.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

MARKER = (
    "reliability(scenario, action, check): a row of docs/reliability.md "
    "(written when AGENTWORKS_WRITE_RELIABILITY=1)"
)
REPORT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "reliability.md"

# What these tests found in the services, and how it ends now; written under the table.
FIXED = [
    "NUL characters (U+0000) in text or JSON — message text, parts, attributes, retry keys, "
    "function descriptions, inputs, schemas, progress, execution messages, questions, "
    "replies, final messages, wake-up notes, schedule prompts, names, pause reasons — "
    "failed INTERNAL (PostgreSQL cannot store them); now INVALID_ARGUMENT naming the field.",
    "NaN and Infinity in Structs (inputs, schemas, workflow defaults, parts, attributes) "
    "failed INTERNAL; now INVALID_ARGUMENT naming the path.",
    "A declared schema's `$ref` to a URL was fetched by the functions service at call and "
    "result validation (jsonschema's default; `file://` too): a declaration could make the "
    "service read other hosts or local files. References are now resolved only inside the "
    "schema and the metaschemas, checked at declaration; an unresolvable one no longer "
    "fails INTERNAL at call time.",
    "`$schema` that is not a string failed INTERNAL.",
    "Invalid Timestamps (`at`, `start_at`, `after`) and previews near the year 9999 failed "
    "INTERNAL; cursors past int64 (scheduler lists, messaging reads) failed INTERNAL.",
    "Error messages quoting a huge input exceeded what clients accept in the status "
    'trailer, so callers saw RESOURCE_EXHAUSTED "Stream removed" (read as busy) instead of '
    "INVALID_ARGUMENT; messages are now cut to fit.",
    "Requests protobuf cannot parse (nested deeper than 100, truncated bytes) ended UNKNOWN "
    "naming an internal exception; now INVALID_ARGUMENT.",
    "Runtime RPCs (Report, UploadFile, AskInput, FinishExecution) answered an unknown "
    "call_id differently from someone else's call, so any principal could tell that a "
    "call_id exists (A3); now the same NOT_FOUND.",
    "FileChunk.media_type was unbounded; now at most 255 printable characters.",
    "JSON Schema `pattern` and `patternProperties` of declared functions ran on Python's "
    "backtracking `re` in the functions event loop: `^(a+)+$` and a crafted input blocked "
    "a replica for minutes (ReDoS). They now run on RE2 (linear time); declared patterns "
    "must compile with RE2 to at most 5,000 instructions (lookaround, backreferences and "
    "oversized programs are refused at declaration, naming the place), and one "
    "validation may spend at most 2^28 byte-instructions on patterns.",
    "An upload past the 64 MiB file limit reached the runtime (grpc.aio, as the runtime "
    'SDK uses) as INTERNAL "Internal error from Core": the status arrived while the client '
    "was still writing (grpc/grpc#36066). The service now reads and drops up to 64 MiB "
    "more of the stream before refusing, so the client gets INVALID_ARGUMENT naming the "
    "file and the limit.",
    "Gateway: integers past int64 in cursors, offsets and seconds (`after`, `after_event`, "
    "`seen_version`, `offset`, `delay_seconds`, `interval_seconds`) failed INTERNAL "
    "(ValueError); the published schemas now state the int64 maximum.",
    "Gateway: a NUL character in a token label or token id, or a lone surrogate (JSON "
    "`\\ud800`, valid JSON but not Unicode) in any argument on /api/v1 (and so from the "
    "stdio MCP proxy), failed INTERNAL; NUL characters and lone surrogates anywhere in tool "
    "arguments are now refused naming the argument.",
    "Gateway: integers beyond ±2^53 in `inputs`, `parts` data and declared schemas were "
    "silently rounded (they travel as doubles in protobuf Structs); now refused naming the "
    "path.",
    "Pattern matching within the budget (up to a few seconds at worst) ran on the functions "
    "event loop; a call's inputs and a runtime's result were then checked in a worker thread "
    "when the schema had patterns, and are now checked in a check worker process with a "
    "hard deadline (see the bounded-cost items below), so the loop stays free.",
    "CreateWakeUp had no idempotency key: a client retrying after a lost answer could create "
    "a second wake-up. It now takes a `submission_id` (the client makes one per call), and "
    "the process-fault test retries every create through the kills with its key and "
    "checks one wake-up per create.",
    "Test fixture: `fault_postgres.stop()/start()` ran pg_ctl as another user from the test "
    "process; that fork() now and then crashed in gRPC's fork handler (\"Fatal Python "
    'error: Segmentation fault", the server never stopped, the messaging outage test '
    "failed). It now signals the postmaster and starts it from a fresh interpreter.",
    # Bounded cost (B1-B10), found by the noisy-neighbour and attack tests:
    "A 9,000-member `enum` checked against 60,000 items froze functions for minutes (each "
    "item compared with each member, each refusal quoting the whole enum: 1.4 GB); `enum` "
    "is now one hash per item, messages quote in part, at most 1,000 problems are kept. "
    "`uniqueItems`, `const`, `properties` and `required` are counted by what they compare.",
    "Nested `anyOf` through `$ref` was accepted at declaration and cost 2^n per value: "
    "a declared schema now has a static cost bound, and one past it is refused naming the "
    "keyword.",
    "Costly checks ran in a thread holding the GIL (`anyOf` x 6 over 36k nulls slowed every "
    "tenant): they now run in killable worker processes with a 2 s deadline "
    "(INVALID_ARGUMENT, reason CHECK_BUDGET) and one worker per principal.",
    "Call's `inputs_json` and declarations' schemas were parsed before their size was "
    "checked, and a Send of 1.5 M parts (7.5 MB) was converted, walked and serialised before "
    "the 256 KiB rule (4 s of messaging's loop per send, RSS 490 -> 1,754 MiB): fields are "
    "now refused from their sizes first, messaging refuses a request from its size as sent "
    "before parsing it and receives at most 4 MiB (gRPC refuses more from the length "
    "prefix).",
    "Requests without an identity were read and parsed before the identity check (24 x 8 MB "
    "grew a service by 388 MiB): the identity is now checked from the metadata first.",
    "Integers past 4,300 digits were refused with Python's advice about "
    "sys.set_int_max_str_digits; now in our words, naming where, with the stated bound.",
    "Gateway: 50,000 `parts` (0.75 MB) took 3.7 s of the serving loop to refuse (the schema "
    "walk ran before the size rule) and pushed another user's sends to 12-22 s: size rules "
    "now run first, large bodies are parsed one at a time without the cyclic collector.",
    "Gateway, on a slower machine: the same attack still pushed the victim's p99 to "
    "64-73 ms (max 211-236 ms): refused arguments lived past the parse into the collector's "
    "old generations (full collections of 110-190 ms), and back-to-back parses held the "
    "loop at every step of the victim's request. Now the size rules run and the refused "
    "arguments are freed before the collector resumes, and a parse is followed by a pause "
    "as long as itself: p99 27-28 ms.",
    "Gateway: 1,100 connections dripping header bytes made 1,256 of 1,257 victim requests "
    "503 (no header timeout; `limit_concurrency` counted idle connections): now a header "
    "timeout (408), a per-address cap (429), idle connections evicted to make room, and "
    "request and long-poll pools of their own.",
    "Gateway: one token holding 1,100 long-polls made another user's requests 503: each "
    "principal now has its own shares (429 with Retry-After), at the gateway and in each "
    "service.",
    "Gateway: bodies past the cap were 400 on /api and 413 on /mcp, read whole first: now "
    "413 on both, refused from Content-Length or as soon as the cap is passed.",
    "One caller's 2,000 conversations made another caller's turn wait behind all of them "
    "(first come, first served): claims now go round the callers; and with a backlog a "
    "claim walked every pending delivery (2,014 blocks; now 69).",
    "A turn command that never exited held its turn until its 3,600 s `wall_seconds`, one "
    "turn at a time: turns now end at AGENTWORKS_RUNTIME_TURN_SECONDS (600 s; demo 120 s) "
    "and 4 conversations run at once.",
    "A command that left `ln -s /usr $AGENTWORKS_PROJECT_ROOT/.agentworks` (or a link at "
    "`.turns`) made every later sandbox of the root fail in bubblewrap until an operator "
    "removed it: the runner now owns those folders and replaces leftovers without following "
    "them.",
    "One log line per skipped upload file (88,500 lines from three calls) and no event on "
    "the call: now one bounded summary (a runner message and a `files_skipped` event).",
    "A service whose serving loop was stuck was never restarted: health now goes NOT_SERVING "
    "past a lag bound, `agentworks up` restarts a service whose health fails, a watchdog "
    "exits after 30 s stuck, and `agentworks_event_loop_lag_seconds` shows the lag.",
    "`crew:DEMO` and `user:DEV` could be registered beside `crew:demo` and `user:dev`: new "
    "names must be lower-case and a look-alike of a stored one is refused.",
    "/metrics answered anyone (an `outbound` execution too): now behind a bearer token; "
    "the embedded PostgreSQL outlived a kill -9 of `make run`: a guard now stops it.",
]

# Found, not fixed here.
KNOWN = [
    "Wide JSON over MCP: 0.7 MB `tools/call`s of 50,000 parts, 4 at a time, push another "
    "user's p99 from ~10 ms to 90-130 ms (max up to ~220 ms, none over 1 s, none refused) "
    "on a slow 2-core machine, against 27-31 ms for the same attack on /api/v1: the MCP "
    "SDK parses each body into its models before the gateway's tool runs, outside the "
    "gateway's one-at-a-time parse and the collector's pause. The test holds it to 3x "
    "calm or 200 ms.",
    "MCP SDK behaviour the gateway cannot change: the official client cannot send a lone "
    'surrogate and its server refuses one as JSON-RPC -32700 ("unexpected end of hex '
    'escape", naming the column, not the argument); `tools/call` with non-object '
    'arguments gets -32602 "Invalid request parameters" without naming the field; and '
    'the client reports a 401 (revoked or unknown token) as "Server returned an error '
    "response\", without the gateway's message.",
    "After a service restart the typed clients' first calls can fail fast with UNAVAILABLE "
    '("connections to all backends failing"): the channel\'s reconnect backoff can outlast '
    "the retry policy. Callers must retry UNAVAILABLE (runtimes and these tests do).",
    "Schema bombs that run to their 2 s deadline in both check workers (niced) leave a "
    "2-core machine little room: another tenant's p99 went from ~7 ms to 70-150 ms in some "
    "runs (none over 1 s, none refused), so the test holds it to 3x calm or 200 ms.",
    "Valid large inputs cost the serving loop what their size does: a Call with 30,000 "
    "small arrays (accepted, uniqueItems checked in a worker) is then parsed, hashed and "
    "stored by the service, about 30 ms of its loop; a principal calling so at its full "
    "rate (50 calls/s) moved another tenant's p99 from 7 to 73 ms (none over 1 s). The fix "
    "left: the check worker hands the service the canonical text and hash to store.",
    "Over /mcp, an integer past 4,300 digits is refused by the MCP SDK's JSON parser as a "
    "JSON-RPC parse error that does not name the argument (/api/v1 names it).",
]

# What this suite does not cover yet; written under the table.
PENDING = [
    "The gateway's access matrix by principal (which tool action each token may use) is "
    "covered per service at the gRPC level (access matrix above) and by the bad-input "
    "rows for missing roles and someone else's ids; there is no separate gateway matrix.",
]


@dataclass
class Row:
    scenario: str
    action: str
    check: str
    test: str
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> outcome

    def outcome(self) -> str:
        if not self.outcomes:
            return "not run"
        values = list(self.outcomes.values())
        failed = values.count("failed")
        skipped = values.count("skipped")
        n = len(values)
        cases = f" ({n} cases)" if n > 1 else ""
        if failed:
            return f"**FAILED** ({failed} of {n})" if n > 1 else "**FAILED**"
        if skipped == n:
            return "skipped"
        if skipped:
            return f"passed{cases}, {skipped} skipped"
        return f"passed{cases}"


class ReliabilityReport:
    """Collects (scenario, action, check, outcome) per test function and writes the table."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.rows: dict[str, Row] = {}
        self.appendices: dict[str, str] = {}  # module name -> markdown

    @staticmethod
    def _info(item: pytest.Item) -> dict[str, str] | None:
        mark = item.get_closest_marker("reliability")
        if mark is not None:
            return dict(mark.kwargs)
        module = getattr(item, "module", None)
        info = getattr(module, "RELIABILITY", None)
        if not isinstance(info, dict):
            return None
        name = getattr(item, "originalname", item.name)
        return dict(info) if info.get("test", name) == name else None

    @staticmethod
    def _test_name(nodeid: str) -> str:
        return nodeid.split("[", 1)[0]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            info = self._info(item)
            if info is None:
                continue
            module = getattr(item, "module", None)
            appendix = getattr(module, "RELIABILITY_APPENDIX", None)
            if module is not None and callable(appendix):
                self.appendices.setdefault(module.__name__, appendix())
            name = self._test_name(item.nodeid)
            row = self.rows.setdefault(
                name,
                Row(info.get("scenario", ""), info.get("action", ""), info.get("check", ""), name),
            )
            row.outcomes.setdefault(item.nodeid, "not run")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        row = self.rows.get(self._test_name(report.nodeid))
        if row is None:
            return
        current = row.outcomes.get(report.nodeid, "not run")
        if report.failed:
            row.outcomes[report.nodeid] = "failed"
        elif report.skipped and current != "failed":
            row.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed and current != "failed":
            row.outcomes[report.nodeid] = "passed"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.rows:
            return
        REPORT.write_text(render(list(self.rows.values()), list(self.appendices.values())))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render(rows: list[Row], appendices: Sequence[str] = ()) -> str:
    """docs/reliability.md: one table row per reliability test, in collection order."""
    lines = [
        "# Reliability and security (generated)",
        "",
        "Written by the test suite (`make reliability`, i.e. `AGENTWORKS_WRITE_RELIABILITY=1`",
        "pytest over the reliability, access-matrix, fuzz and bad-input tests); do not edit by",
        "hand. Each row is one test function; parametrized tests count their cases. Faults are",
        "injected at seeded random points (`AGENTWORKS_FAULT_SEED`, default 7); the soak",
        "version of the process-fault test runs for `AGENTWORKS_SOAK_SECONDS` (`make soak`).",
        "Noisy-neighbour rows (B5) time a second tenant's ordinary requests, one after",
        "another, without and then under the attack in the same run: its p99 under attack",
        "must stay within 3x its calm p99 (never tighter than 50 ms, the scheduling noise of",
        "a shared 2-core machine), no request of it may take over 1 s, and none may fail; a",
        "second window is measured when the first breaks the bound (noise passes, harm does not).",
        "",
        "| scenario | what was done | what was checked | outcome | test |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {_cell(row.scenario)} | {_cell(row.action)} | {_cell(row.check)} "
            f"| {row.outcome()} | `{row.test}` |"
        )
    for appendix in appendices:
        lines += ["", appendix.rstrip()]
    for title, items in (
        ("Found by these tests and fixed", FIXED),
        ("Found, not fixed yet", KNOWN),
        ("Not covered here", PENDING),
    ):
        lines += ["", f"## {title}", ""]
        lines += [f"- {item}" for item in items]
    return "\n".join(lines) + "\n"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if os.environ.get("AGENTWORKS_WRITE_RELIABILITY") == "1" and not (
        config.pluginmanager.has_plugin("agentworks-reliability-report")
    ):
        config.pluginmanager.register(ReliabilityReport(config), "agentworks-reliability-report")
