"""Run the benchmarks and write docs/performance.md: `python -m bench [--quick]`."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import platform
import sys

from bench import messaging
from bench.harness import Processes, Report, postgres


async def run(args: argparse.Namespace) -> Report:
    report = Report()
    seconds = 2.0 if args.quick else 5.0
    sends = 100 if args.quick else 1000
    readers = 20 if args.quick else 100
    idle = 100 if args.quick else 1000
    scenarios = [
        ("send throughput", lambda p: messaging.send_throughput(p, report, seconds)),
        ("wake latency, 1 replica", lambda p: messaging.wake_latency(p, report, sends, readers, 1)),
        (
            "wake latency, 2 replicas",
            lambda p: messaging.wake_latency(p, report, sends, readers, 2),
        ),
        ("idle reader memory", lambda p: messaging.idle_reader_memory(p, report, idle)),
    ]
    for name, scenario in scenarios:
        if args.only and args.only not in name:
            continue
        print(f"== {name}", flush=True)
        with postgres() as url:
            procs = Processes(url)
            try:
                await scenario(procs)
            finally:
                procs.stop()
    report.notes.append(
        f"Machine: {platform.machine()}, Python {platform.python_version()}, "
        f"{len(__import__('os').sched_getaffinity(0))} CPUs; client and server share them."
    )
    report.notes.append(
        "Sends start a new conversation each (the heaviest send: conversation, inbox, "
        "message and delivery rows in one transaction)."
    )
    report.notes.append(
        "Wake latency is clamped at 0 when the reader returns before the sender has its "
        "receipt (NOTIFY is sent at commit, in parallel with the receipt)."
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke check")
    parser.add_argument("--only", default="", help="run only scenarios whose name contains this")
    parser.add_argument("--out", default="docs/performance.md", help="where to write the table")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    command = "make bench" if not args.quick else "python -m bench --quick"
    pathlib.Path(args.out).write_text(report.markdown(command))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
