"""Run the benchmarks and write docs/performance.md: `python -m bench [--quick]`."""

from __future__ import annotations

import os

# Before gRPC is imported: this process starts PostgreSQL and services (fork + exec)
# while gRPC threads run; gRPC's fork handlers can abort such a child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# The benchmark measures throughput, not fairness: its few principals send as fast as
# they can, so every principal gets an operator's unbounded share (B7) in every process.
os.environ.setdefault(
    "AGENTWORKS_PRINCIPAL_SHARES",
    '{"default": {"requests": 1000000, "waits": 1000000, '
    '"creates_per_second": 1000000000, "burst": 1000000000}}',
)

import argparse
import asyncio
import pathlib
import platform
import sys
import traceback

from agentworks.core.logging import configure_logging
from bench import a2a_binding, conversation, functions, gateway, growth, mcp_tasks, messaging, push
from bench.harness import Processes, Report, postgres
from bench.notes_issue40 import ISSUE_40


async def run(args: argparse.Namespace) -> Report:
    report = Report()
    seconds = 2.5 if args.quick else 10.0
    sends = 100 if args.quick else 1000
    readers = 20 if args.quick else 100
    idle = 100 if args.quick else 1000
    calls = 30 if args.quick else 120  # sequential round trips, per system
    call_seconds = 3.0 if args.quick else 9.0  # closed-loop time, per system
    conversation_seconds = 3.0 if args.quick else 6.0  # per system and concurrency
    small_history = growth.Scale(conversations=10, exchanges=50)  # 10^3 messages
    large_history = (
        growth.Scale(conversations=10**4, exchanges=5)  # 10^5 messages
        if args.quick
        else growth.Scale(conversations=10**5, exchanges=5)  # 10^6 messages
    )
    growth_ops = 96 if args.quick else 480
    timers = (1000, 10**4) if args.quick else (1000, 10**5)
    mcp_ops = 60 if args.quick else 160
    scenarios = [
        ("send throughput", lambda p: messaging.send_throughput(p, report, seconds)),
        ("wake latency, 1 replica", lambda p: messaging.wake_latency(p, report, sends, readers, 1)),
        (
            "wake latency, 2 replicas",
            lambda p: messaging.wake_latency(p, report, sends, readers, 2),
        ),
        ("idle reader memory", lambda p: messaging.idle_reader_memory(p, report, idle)),
        ("push wake latency", lambda p: push.wake_latency(p, report, sends // 2, readers)),
        (
            "call change stream vs GetStatus poll",
            lambda p: push.call_watch_latency(p, report, sends // 2, readers),
        ),
        (
            "idle stream cost",
            lambda p: push.idle_stream_cost(p, report, idle, 6.0 if args.quick else 30.0),
        ),
        (
            "call round trip and throughput",
            lambda p: functions.call_round_trip(p, report, calls, call_seconds),
        ),
        (
            "conversation round trip",
            lambda p: conversation.conversation_round_trip(p, report, conversation_seconds),
        ),
        ("running-limit contention", lambda p: functions.limit_contention(p, report, 200, 10)),
        (
            "history growth",
            lambda p: growth.history_growth(p, report, small_history, large_history, growth_ops),
        ),
        ("timer drain", lambda p: growth.timer_drain(p, report, *timers)),
        ("mcp vs grpc", lambda p: gateway.mcp_vs_grpc(p, report, mcp_ops)),
        ("mcp tasks", lambda p: mcp_tasks.task_poll_and_notify(p, report, mcp_ops)),
        ("a2a round trip", lambda p: a2a_binding.a2a_round_trip(p, report, conversation_seconds)),
    ]
    for name, scenario in scenarios:
        if args.only and args.only not in name:
            continue
        print(f"== {name}", flush=True)
        with postgres(stat_statements=name in STATEMENT_COUNTS) as url:
            procs = Processes(url)
            try:
                await scenario(procs)
            except Exception as exc:  # one broken scenario must not lose the others
                traceback.print_exc()
                report.notes.append(f"**{name} failed** and has no rows: {exc!r}")
            finally:
                procs.stop()
    report.notes.append(
        f"Machine: {platform.machine()}, Python {platform.python_version()}, "
        f"{len(__import__('os').sched_getaffinity(0))} CPUs; client and server share them."
    )
    report.notes.append(
        "Service processes run with LOG_LEVEL=warning, so they write no line per request. "
        "At the default (info), a send logs one JSON line and a call round trip three "
        "(accepted, claimed, finished): about 40 us of the service's CPU per line "
        "(measured in-process), some 4% of a send and 1% of a call round trip; "
        "two back-to-back runs at 32 senders gave 787-841 msg/s at info against 857-868 "
        "at warning."
    )
    report.notes.append(
        "Sends start a new conversation each (the heaviest send: conversation, inbox, "
        "message and delivery rows in one transaction)."
    )
    report.notes.append(
        "Wake latency is clamped at 0 when the reader returns before the sender has its "
        "receipt (NOTIFY is sent at commit, in parallel with the receipt)."
    )
    report.notes.extend(OPTIMISATIONS)
    report.notes.extend(ISSUE_40)
    return report


# Scenarios that count SQL statements: their database server loads pg_stat_statements.
STATEMENT_COUNTS = {
    "conversation round trip",
    "call round trip and throughput",
    "idle stream cost",
}

# What the profiling-led changes bought, measured back to back (before, then after) on
# this machine with the scenarios above; kept here so the page says it next to the table.
OPTIMISATIONS = [
    "Profiled (py-spy on the service process, cProfile in-process, CPU time per "
    "operation of every process) before changing anything. The functions service was "
    "CPU-bound on its one event loop: about 40 ms of its CPU per call round trip, mostly "
    "SQLAlchemy statement building and execution around ~20 short transactions, and every "
    "new call waking all idle runtimes for an empty claim each.",
    "functions: GetStatus is one statement (call, owner check and every page as JSON, one "
    "snapshot) instead of two transactions of up to six statements; ClaimExecution and "
    "FinishExecution are one statement each (the finish writes its completion notice in "
    "the same statement); Call reads target and function in one query and inserts under "
    "the target lock in one pipelined transaction (BEGIN, lock+insert, count: one round "
    "trip, then COMMIT); the hot statements run as fixed SQL on the pooled connection's "
    "psycopg connection, skipping SQLAlchemy's statement and result layers. Call round "
    "trip before -> after: throughput 11.4 -> 38.3 calls/s, p50 134 -> 43 ms, CPU per "
    "round trip (all processes) 74 -> 30 ms.",
    "functions: the claims of one target in a process take turns, and a claim woken by a "
    "NOTIFY skips the database when an attempt that started after its wake-up found "
    "nothing (that attempt saw the new call already); ending a call no longer wakes "
    "runtimes (a freed slot makes no call claimable: over the limit calls are refused, "
    "not queued). Together: about one claim query per call instead of one per idle "
    "runtime.",
    "functions: a call without a retry key on a target whose committed open calls "
    "already reach its limit is refused from the first read, without queueing for the "
    "target's lock (accepting still happens only under the lock, so the limit stays "
    "exact). 200 concurrent calls at limit 10, answer p50: 1159 -> 397 ms.",
    "messaging: EnqueueDelivery is one statement in autocommit (retry-key lookup, "
    "conversation row lock and position, delivery, NOTIFY) instead of a transaction of "
    "five; a concurrent twin makes it fail whole with a unique violation and it is retried. "
    "messaging CPU per timer fired 6.4 -> 2.3 ms; timer drain 135 -> 234 timers/s.",
    "Second round (profiled again with py-spy on each process, and per-process CPU time "
    "per operation): the hot statements of every service now run on `Database.raw()`, "
    "plain autocommit psycopg connections, instead of through SQLAlchemy's connection, "
    "statement and result layers. Store CPU per new-conversation send, in-process at 32 "
    "concurrent: 1.40 -> 0.53 ms.",
    "messaging: concurrent new-conversation sends share one statement and one commit "
    "(natural batching: a send never waits for a batch to fill; under load up to 64 "
    "ride together). Store CPU per send at 32 concurrent: 0.53 -> 0.11 ms (about 32 "
    "sends per statement); PostgreSQL CPU per send 0.69 -> 0.61 ms.",
    "identity: a verified token is remembered (its expiry still checked on every call), "
    "and the gateway keeps one signer per caller, so a known caller's identity costs a "
    "dictionary lookup instead of an HMAC check (about 0.15 ms per RPC, on every RPC "
    "including the floor's).",
    "functions: GetStatus `until_ended` lets `FunctionsClient.wait` make one request "
    "per call instead of one per change (3 -> 1 status requests per round trip); then "
    "Call with `wait_seconds` returns the ended call itself (no status request at all), "
    "and a plain finish (no output schema, no notice) is one statement instead of a read "
    "and a write. CPU per round trip (all processes) 20.7 -> 17.6 ms before the Call wait.",
    "scheduler: a firing batch records its outcomes with one batched UPDATE per kind of "
    "outcome instead of one UPDATE per row.",
    "gateway: the token lookup is one plain statement, identity signers are kept per "
    "caller, and the MCP tool list is built once (the MCP SDK otherwise runs the "
    "tools/list handler on every tools/call to check `Mcp-Param-*` headers). MCP send, "
    "one at a time: 19.9 -> 13.8 ms; gateway CPU per call 8.7 -> 5.2 ms.",
    "Third round (profiled again with py-spy, CPU per round trip of the bench process, "
    "the functions service and PostgreSQL measured at 32 callers): the plain finish "
    "(one statement) was never taken, because a call without an output schema stores JSON "
    "null there, not SQL NULL; every finish fell back to a read and a second write. And a "
    "Call waiting for its end read the status three times before the end (once at once, "
    "once when its execution was claimed, once when it ended) besides the final view. Now "
    "ends are announced on their own (`<call_id> ended`), the Call listens before the "
    "call exists, and the status is read once, at the end. Together: 117 -> 162 calls/s; "
    "CPU per round trip 14.5 -> 10.7 ms (service 8.0 -> 5.9, PostgreSQL 3.6 -> 2.4).",
    "functions: FinishExecution can claim the runtime's next execution (`claim_next`), "
    "and the SDK's ExecutionWorker asks for it while it serves: while calls are queued, "
    "one request per execution instead of two. 162 -> 189 calls/s; CPU per round trip "
    "10.7 -> 9.1 ms. Then the finish statement itself makes a claim of one target (one "
    "statement instead of two), back to back: 142-166 -> 185-240 calls/s, CPU per round "
    "trip 10.7-12.7 -> 7.5-9.7 ms.",
    "functions: Call inserts through one statement in autocommit (the `create_call` "
    "database function: lock the target row, insert, count with a snapshot taken after "
    "the lock; over the limit it raises and nothing is stored) instead of a pipelined "
    "transaction and its COMMIT. Measured back to back: 135-148 -> 172-173 calls/s; "
    "service CPU per round trip 6.2-6.6 -> 5.3 ms.",
    "messaging: new-conversation sends keep one batch in flight instead of four, so the "
    "sends that arrive meanwhile ride together (at 32 senders: 3 sends per batch instead "
    "of 1.2; messaging CPU per send 1.45-1.71 -> 1.12-1.20 ms, PostgreSQL 0.82-0.93 -> "
    "0.41-0.43 ms; share of the RPC floor 0.31-0.36 -> 0.44-0.48 in the same runs), and a "
    "batch travels as one JSON parameter instead of 14 arrays (client CPU per 3-send "
    "batch 0.65 -> 0.44 ms).",
    "Tried and not kept (no gain beyond the noise, measured back to back): two "
    "processes per service behind round robin, for the messaging service and the floor "
    "alike (sends are CPU-bound on this 2-core machine: 1.84 cores busy at 900 msg/s, "
    "and each process's batches get smaller); uvloop as the event loop (grpc.aio polls "
    "on its own thread, so the loop is not where the time goes); yielding once before "
    "taking a batch (3.5 -> 5 sends per batch, throughput within the noise); keeping "
    "declarations per functions process and confirming their row versions in the Call "
    "statement, to save the read before each call (service CPU per round trip 3% lower, "
    "throughput within the noise: not worth a cache that must be kept right). Hot "
    "statements are prepared by psycopg after their fifth run (its default), and a "
    "generic plan is used: forcing custom plans made the send statement cost 3x the "
    "database CPU.",
    "Fourth round (py-spy with --gil on each service process: only samples that hold "
    "the GIL). At 32 senders the messaging process holds the GIL about 80% of the time, "
    "and about half of that is grpc.aio's own per-request code; the functions process "
    "likewise at 32 callers. So per-request Python is what limits both. The server "
    "interceptor now builds each method's wrapped handler once (it used to build a handler, "
    "two closures and a generator-based context manager on every request), metrics keep "
    "their labelled children instead of calling `labels()` twice per request, and a send "
    "or call without a retry key no longer hashes its request (the hash is only compared "
    "on a retry). Back to back, two rounds each: messaging CPU per send 1.08-1.14 -> "
    "0.94-1.03 ms, floor server CPU per request 0.61-0.71 -> 0.50-0.62 ms, functions CPU "
    "per call round trip 5.6-5.7 -> 4.2-5.3 ms. The floor gains as much as the send does, "
    "so the send's share of the floor moves within the noise (0.42-0.54 in those runs).",
    "functions: the walk that looks for `pattern` keywords before each Call's input check "
    "(patterns run on RE2 in a thread) built a path string for every keyword a schema "
    "could have; it now visits only those present: 33 -> 5 us per Call for the "
    "benchmark's schema, about 1% of the service's CPU per round trip.",
    "Looked at and left: the messaging sweep (one statement a second) showed up in a "
    "sampled profile, but sweeping every 60 s instead of every 1 s changed nothing "
    "measurable; psycopg's `PQsendQueryPrepared` looked expensive in profiles that count "
    "every running thread, but it is the wait for the GIL after libpq released it (it "
    "disappears with --gil).",
    "Where an idle call round trip's time goes (timed inside the functions service): on "
    "this machine each hop between processes costs a wake-up. The Call's declaration "
    "read takes 1.2 ms in the service at idle, and the same statement takes 1.18 ms from "
    "a bare psycopg client when 5 ms of idle separate the runs, against 0.32 ms back to "
    "back. Our idle round trip makes about eleven hops: the Call, two statements, the "
    "NOTIFY to the claim, the claim, the claim's answer, the finish request and "
    "statement, the NOTIFY of the end, the status read, the answer. procrastinate makes "
    "about five: defer, NOTIFY, fetch, finish. Hence about 1.6-2x its idle latency. "
    "Waking local waiters in the process, without waiting for PostgreSQL's NOTIFY, "
    "would save two of those hops (about 1 ms) at the price of a second wake-up for "
    "each; not done.",
    "Where the call round trip's CPU goes now (py-spy, per-process CPU): about 4 ms in "
    "the functions service, of which about a third is grpc.aio's own machinery (its poller "
    "thread and per-request tasks); about 2 ms in PostgreSQL for five statements; about "
    "2 ms in the benchmark process (the gRPC client side of the caller and the runtimes, "
    "and the SDK's per-execution folder). A round trip is now two requests (Call waiting "
    "for its end; FinishExecution claiming the next). procrastinate's round trip is three "
    "database calls in one process at about 5 ms of CPU, so a 2x lead would need ours "
    "below about 2.5 ms: less than two gRPC requests and five statements cost in Python. "
    "That target stays out of reach as specified.",
    "Fifth round: the timer drain was latency- and request-bound, not database-bound: at "
    "10^4 due wake-ups (`--quick`) the scheduler made one EnqueueDelivery request and one "
    "autocommit statement (with its own commit and NOTIFY) per occurrence, about 4.3 ms of "
    "CPU per timer fired across processes (scheduler 1.2, messaging 1.8, PostgreSQL 1.25). "
    "Messaging now has EnqueueDeliveries: up to 500 deliveries in one request and one "
    "statement (conversations locked in id order, positions per conversation in request "
    "order, one NOTIFY per target; each item succeeds or fails alone), and the scheduler "
    "sends each claimed batch as one request. Back to back at 10^4: 351-419 -> 1,294-1,340 "
    "timers/s; CPU per timer fired about 4.3 -> 0.8 ms (scheduler 0.24, messaging 0.11, "
    "PostgreSQL 0.44). The drain is now bound by one batch at a time per replica: "
    "`SCHEDULER_BATCH_SIZE=500` gave 2,141 timers/s; the default stays 100.",
    "Then, with 10^5 due (the full run), the drain still fell to about a third of the "
    "10^3 rate (518 against 1,520 timers/s): the claim of due wake-ups, built with "
    "SQLAlchemy, took 40-200 ms (seen in pg_stat_activity) and scanned the whole table. "
    "psycopg prepares a statement after its fifth run, and a prepared statement's generic "
    "plan cannot use the partial index `wake_ups_due ... WHERE status = 'pending'` when "
    "'pending' is a parameter. SQLAlchemy's connections no longer prepare (the hot "
    "statements on `raw()` still do, with such constants in their text); the same "
    "applies to the turn claim's and the sweepers' partial indexes. Back to back at "
    "10^5: 513 -> 800 timers/s.",
    "scheduler: a batch's delivered wake-ups (and schedule occurrences) are recorded with "
    "one UPDATE over arrays instead of an executemany of one UPDATE per row (each planned "
    "anew, now that SQLAlchemy's statements are not prepared). Back to back at 10^4: "
    "1,170-1,237 -> 1,314-1,325 timers/s.",
    "Looked at again and left, for sends at 32: two messaging processes behind round robin "
    "(with today's per-send costs) are still worse, 690-718 against 857-933 msg/s: each "
    "process's batches get smaller, so messaging CPU per send rises 0.98 -> 1.44 ms and "
    "PostgreSQL's 0.38 -> 0.60 ms. In PostgreSQL, the foreign-key checks are about a third "
    "of a send's database CPU (0.38 -> 0.26 ms per send without them, at 3 sends per "
    "statement); they stay, as the guard of every other write path. The per-statement "
    "cost dominates small batches: 0.90 ms of database CPU per send alone, 0.28 at 10 per "
    "statement.",
    "Sixth round, looked at and left: pool sizes (FUNCTIONS_POOL_SIZE 4, 10 and 20 at 32 "
    "callers, back to back: 147-160 calls/s in every run, within the noise; the service "
    "is CPU-bound, not waiting for connections); a call round trip's CPU, summed over the "
    "processes, is about 2.7 ms in the benchmark process (callers and runtimes), 5.3 ms in "
    "the functions service and 2.7 ms in PostgreSQL, so twice procrastinate's rate would "
    "need about half of it. In the gateway's MCP path the SDK's request handling is most "
    "of the time; the bearer-token lookup (one statement per request, kept so that a "
    "revocation holds at once on every replica) is about 7% of it.",
    "Seventh round, sends at 32, looked at and left. Where the messaging process's CPU "
    "beyond the floor's goes, found by stubbing the store in a scratch copy and measuring "
    "floor and variant back to back: with no store call at all a send reached 0.73-0.89 "
    "of the floor (messaging CPU 0.64 ms per send, the floor's 0.48-0.59); waiting on a "
    "batch that sleeps 2 ms instead of running its statement, 0.80 ms; a batch running a "
    "trivial SELECT through psycopg's async connection, 0.96-1.12 ms; the real statement, "
    "about 1.0 ms. So about 0.15 ms of a send is the request being suspended while its "
    "batch runs and about 0.2 ms the database round trip in Python (in a bare loop, a "
    "statement costs 125-190 us of CPU on psycopg's async connection against 63 us on "
    "its sync one). Tried, 6 alternating rounds of 3 s each: the batch on a sync "
    "connection in a worker thread (847 against 866 msg/s), two batches in flight, in "
    "threads or on the loop (642-659 against 816: smaller batches, more CPU per send "
    "everywhere), and a lazier garbage collector (`gc.freeze()` with gen-0 thresholds of "
    "10,000 and 50,000: 840-853 against 882). None kept. The send's share of the floor "
    "stays at the line: 0.45-0.52 in this round's runs.",
    "Eighth round, calls at 32, looked at and left: two functions processes behind round "
    "robin (callers and runtimes split between them, one database), against one process, "
    "8 alternating rounds of 3 s: 150 against 145 calls/s (medians; rounds ranged "
    "131-192), CPU per round trip 10.5 against 10.0 ms. The round trip is CPU-bound on "
    "the whole machine, not on the one event loop. Profiled again (py-spy): the functions "
    "process spends about a quarter of its samples in its four statements per round trip "
    "(declaration read, insert, finish with the next claim, the ended view), the rest in "
    "grpc.aio and asyncio; the benchmark process about a third in grpc's client call and "
    "a tenth creating each execution's folder (F4). No single cost stands out; 2x the job "
    "queue stays out of reach, as argued above.",
    "Ninth round, looked at and left (measured with per-process CPU time and py-spy "
    "--gil, sends and calls at 32): at 32 senders the messaging process held the GIL in "
    "77% of samples, 48% of them in grpc.aio's own callbacks and about a fifth in our "
    "code; CPU per operation, floor 0.64-0.91 ms (client 0.26-0.36, server 0.38-0.55) "
    "against send 1.11-1.72 ms (client 0.29-0.44, messaging 0.60-0.92, PostgreSQL "
    "0.22-0.36). Calls: 6.0-8.6 ms per round trip (benchmark process 1.5-2.3, functions "
    "3.0-4.3, PostgreSQL 1.4-2.0), a quarter of the functions process's samples in "
    "psycopg's per-statement Python for its four statements. A Python service doing only "
    "the minimum (two requests, four statements) would still need about 4 ms, so 2x the "
    "job queue stays out of reach. No hot path changed; Call gained "
    "`fresh_submission_id`, which spares the gateway's waiting MCP/CLI calls one lookup "
    "and lets a full target refuse them at once.",
    "Tenth round: no performance work; this run re-measures after functional changes "
    "(calls' unknown inputs refused through `unevaluatedProperties`, report retries k"
    "nown by exact sequence, runtimes' default concurrency from their targets' runnin"
    "g limits). The benchmark's runtimes are given `concurrency=1` explicitly, so eac"
    "h stays one job slot like one of procrastinate's 8. The machine was slower in th"
    "is run (RPC floor at 32: 1,764 against 2,330 requests/s before); the ratios held"
    ": send 0.46 of the floor, calls 0.84x the job queue.",
    "Eleventh round (issue 27): the conversation round trip (Send -> the turn claimed by "
    "a runtime -> its reply -> the caller's waiting Read returns) against a2a-sdk 1.3 with "
    "its PostgreSQL task store, added to the benchmark. Measured before changing anything "
    "(`python -m bench --quick --only conversation`, load average about 6 on the 2 cores "
    "from other work, so indicative): 1 caller 35.5 round trips/s (p50 26.2 ms), CPU per "
    "round trip 22.8 ms, 43.5 SQL statements per round trip; 32 callers 74.9/s, 14.0 ms, "
    "22.1 statements. Five requests per round trip (Send, Read, ClaimTurn, SendMessage, "
    "CompleteTurn); ClaimTurn was a transaction of six statements through SQLAlchemy "
    "(BEGIN and COMMIT: eight), CompleteTurn one of four plus its lock (six), SendMessage's "
    "inbox lookup a transaction of three, and each new message woke all eight idle "
    "runtimes' ClaimTurn into an empty claim transaction.",
    "messaging: ClaimTurn is one statement in autocommit on `Database.raw()` (conversation, "
    "turn, deliveries and their messages, and whether more is claimable), CompleteTurn one "
    "statement; a NOTIFY wakes one idle claim of its target per process "
    "(`Listener.subscribe(one=True)`; a claim that takes a turn while more are claimable "
    "wakes the next; one leaving with an unused wake-up passes it on); Read checks the "
    "inbox's principal in its first page's statement; the inbox and turn-lease lookups run "
    "on raw(); and SendMessage `complete_turn_id` stores the reply and completes the turn "
    "in one request (the SDK's `send_message(..., end_turn=True)`), the inbox and the turn "
    "looked up in one statement. Four requests and about 8 statements per round trip "
    "(Send 1, Read 2, ClaimTurn 1, SendMessage 3, plus the idle claims' 5 s fallback polls "
    "and the sweeper). Before -> after, same command: 1 caller 43.5 -> 8.05 statements, "
    "CPU 22.8 -> 9.6 ms, p50 26.2 -> 16.0 ms; 32 callers 22.1 -> 7.07 statements, CPU 14.0 "
    "-> 7.8 ms.",
    "What each part bought, switching one off at a time in a scratch copy (quick runs, "
    "back to back): waking every idle claim instead of one, 1 caller: 14.6 statements and "
    "12.5 ms CPU per round trip against 8.05 and 9.6 (at 32 callers the runtimes are seldom "
    "idle: no difference); the reply not completing the turn (a CompleteTurn of its own): "
    "the same statements (8.02), CPU 11.2 against 9.6 ms at 1 caller and 9.0 against 7.8 at "
    "32 (one request fewer). Throughput moved with the machine's load between those runs "
    "(the peer's own rate varied 1.5x), so only ratios within one run are held to targets. "
    "Left for later: a streaming protocol between runtimes and services, a reply that also "
    "claims the runtime's next turn, and the reply and the completion in one statement "
    "(one statement fewer). A Send that waits for the reply is ruled out by C2 (the receipt "
    "is never an answer). The table's conversation rows come from one run of `python -m "
    "bench --only conversation --update docs/performance.md` taken with other engineers' "
    "work on the machine (load averages about 3-5): indicative as numbers; the ratios are of "
    "one run.",
    "Twelfth round (issue 27), calls and sends at 32, measured before changing "
    "anything. The call throughput rows now also measure a2a-sdk 1.3 (one "
    "non-streaming `message/send` on a new context per call, its task store in a "
    "database of its own) in the same alternating rounds, and count SQL statements "
    "per round trip; 5 rounds instead of 3, because two back-to-back quick runs (1 s "
    "rounds) gave 0.86 and 1.51 of procrastinate's rate. Full-length `--only 'call "
    "round trip'` before any change: 0.72x procrastinate (211 against 292 calls/s), "
    "CPU per round trip 5.91 against 3.17 ms. The SDK already claims through the "
    "finish (`claim_next`): 4.1 statements per round trip (Call: the declaration "
    "read and `create_call`; FinishExecution: the finish and the next claim in one; "
    "the ended view) against procrastinate's 9.0 and a2a-sdk's 17, and still "
    "procrastinate spends about half our CPU: the statements are not what costs.",
    "Where a call round trip's CPU goes (per-process CPU time and py-spy --gil at 32 "
    "callers, before and after merging main's telemetry): the functions service "
    "2.2-3.1 ms, the benchmark process (callers and runtimes) 1.0-1.6 ms, PostgreSQL "
    "and the rest 1.4-1.9 ms. In the functions process Call holds 32% of the GIL "
    "samples (the ended view read 9%, the declaration read 9%, the insert 7%), "
    "FinishExecution 15%, psycopg's per-statement Python about a fifth in all, "
    "grpc.aio's own callbacks 38%, and the telemetry interceptor's metrics and trace "
    "context about 3%. In the benchmark process grpc's client call is 40-50%, the "
    "SDK's per-execution bookkeeping (context, folder, span, heartbeat task) about a "
    "tenth. Tried in a scratch copy: the ended view read replaced by a stub (no "
    "statement at all): functions CPU per round trip 2.44 and 2.85 ms against 2.35, "
    "within the noise, so a finish that hands the ended view to the waiting Call "
    "(one statement fewer) was not built. 1.5x procrastinate's rate on this "
    "CPU-bound machine needs about 2.1-2.5 ms of CPU per round trip (its 3.2-3.8 ms "
    "/ 1.5); two unary gRPC requests cost about 1.3-1.8 ms of client and server CPU "
    "alone (the RPC floor, ninth round) and the four statements about 1.4 ms in "
    "PostgreSQL, so that target is out of reach with unary requests. The lever left, "
    "a streaming protocol (a long-lived stream carrying finishes and claims: no call "
    "set-up, metadata or interceptor per message), was sized in a scratch grpc.aio "
    "test (32 concurrent loops, a 200-byte message each way with an identity header, "
    "2 rounds of 4 s each): a bare unary call cost 0.44 ms of client and server CPU "
    "(3,100-3,200/s), a message each way on an open bidirectional stream 0.12 ms "
    "(11,300-11,700/s). Both of a round trip's requests streamed would save about "
    "0.3 ms each, up to about 0.6 ms each with our interceptor's per-call work (the "
    "RPC floor's 0.64-0.91 ms per request): some 5 ms of CPU per round trip would "
    "remain, twice what 1.5x the job queue allows, so it was not built in this round "
    "either. The table's call and send rows are one run each after the merge "
    "(`python -m bench --only 'call round trip' --update docs/performance.md`, then "
    "`--only 'send throughput'`), load average about 4: calls 0.82x procrastinate "
    "(not met) and 3.64x a2a-sdk (met; a2a-sdk spends 14.8 ms of CPU per round "
    "trip); sends at 32 0.55 of the RPC floor (met), with no change to the send "
    "path: the share moves with the machine's load (0.85 in a quieter run of this "
    "round, 0.46 in the tenth round's), so it is at the line rather than safely past "
    "it.",
    "Thirteenth round (issue 27). A full `make bench` of the twelfth round's code lost "
    "the timer drain to `out of shared memory` on every connection to the server: the "
    "scheduler's claim tried each row's advisory lock in the scan's WHERE, which "
    "PostgreSQL evaluated for every due row before the sort and the LIMIT (a claim of "
    "100 held 3,000 locks in the new test; 10^5 in the drain). The claim now row-locks a "
    "bounded window of the oldest due rows (four batches) and tries the locks there "
    "only; the functions notice outbox had the same statement and the same fix. Timer "
    "drain at 10^5 after the fix: 1,035 timers/s (`--only 'timer drain'`).",
    "The call throughput rows now also measure a floor (bench/floor_server.py, Jobs): "
    "the round trip's two requests on our gRPC server stack with one INSERT and one "
    "UPDATE and nothing else. It corrects the twelfth round's reasoning: the floor ran "
    "576-821 calls/s in three runs, 2.2x procrastinate's rate in each, at 2.1-2.7 ms of CPU "
    "per round trip for everything, so two unary requests do not put 1.5x the job "
    "queue out of reach; the service's own work does. CPU per round trip, ours against "
    "the floor, per process (two 4 s rounds at 32 callers): the benchmark process "
    "(callers and SDK runtimes) 2.0-2.2 against 0.6 ms, the service 3.5-3.7 against "
    "1.3, PostgreSQL 2.1 against 0.5. In PostgreSQL (pg_stat_statements under load) "
    "create_call takes 2.4 ms of execution time per call (the target row's lock, held "
    "to commit so that the running limit is exact, queues the 32 callers of one target, "
    "and its insert maintains every index of calls), the finish 1.3 ms, the declaration "
    "read and the ended view 0.1 ms each. py-spy --gil in the service: Call 44% (the "
    "ended view 11%, the declaration read 8%, validation 5%, the capability token 3%; "
    "psycopg's per-statement Python about 30% across all methods), FinishExecution 18%; "
    "in the benchmark process grpc's client call 29% and the SDK's per-execution work "
    "(context, folder paths, lease, handler task) most of the rest. No one part is half "
    "of the excess, and 1.5x procrastinate needs about half our CPU per round trip "
    "(its 4.85 ms / 1.5 = 3.2 ms against our 8.7 in one run): the target is left open "
    "with these figures, not called blocked.",
    "Fourteenth round (issue 27). The finish's 1.3 ms above was not the service's work "
    "but a plan: auto_explain under load showed each finish's claim of the next call "
    "scanning calls_listed_by_target (the listing index, 0008) and discarding every "
    "ended call of the target, oldest first (1,700 rows and 1,745 buffers per claim a "
    "few seconds in; pg_stat_statements: 1,468 buffers per finish on average). A "
    "replica's prepared claim gets its generic plan while calls is still small, where "
    "that index and calls_claimable cost the same, and keeps it until the table is "
    "analyzed; the benchmark's runs are shorter than autovacuum's first pass, and a new "
    "deployment's first minutes are too. Claims now take the oldest call from a table "
    "of the queued calls alone (queued_calls, kept by triggers on calls; migration "
    "0011), whose one index is the claim's: 52 buffers and 0.25 ms per finish "
    "(pg_stat_statements, same load), and a test with the plan made while calls is "
    "small (2,033 blocks before, under 100 after). In the per-process scratch split "
    "(two 4-5 s rounds at 32 callers, this machine's rates drift by 15% between runs): "
    "278-303 -> 395-464 calls/s, CPU per round trip 6.4-6.7 -> 3.9-4.5 ms, PostgreSQL "
    "1.75-2.14 -> 1.1-1.3 ms. Also: a function's schemas are compiled once per replica "
    "(the validator had been built per call), and the SDK's ExecutionContext computes "
    "its folder paths once. Tried and not kept, for no gain the noise could not hide: "
    "HOT claims (calls_leased dropped, fillfactor 70: half the updates became HOT, "
    "PostgreSQL CPU per round trip unchanged); NOTIFY outside the writing "
    "transactions (sized by synchronous_commit off for everything, which did not "
    "change the rate either: the NOTIFY queue's commit lock is waited on, but CPU is "
    "what is short); and Call's creates batched per target (the server library's "
    "Batcher, create_call per row in one statement): 3.8-3.9 statements per round trip "
    "instead of 4.0-4.1, so batches held about 1.3 calls, and ours/floor 0.35 and 0.39 "
    "against 0.36 and 0.38 without it in alternating `--only 'call round trip'` runs. "
    "Full `make bench` after the fix: 420.6 calls/s against procrastinate's "
    "591.3 (0.71x, not met) and a2a-sdk's 104.9 (4.01x); in the same page procrastinate "
    "ran 591 calls/s against 368 in the last one and the floor 970 against 821, so 1.5x "
    "procrastinate would now be 0.91 of the floor, which does nothing but one INSERT and "
    "one UPDATE.",
]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke check")
    parser.add_argument(
        "--only",
        default="",
        help="run only scenarios whose name contains this (e.g. 'conversation'); the table "
        "is then printed, and written only where --out says",
    )
    parser.add_argument(
        "--out", default="", help="where to write the table (default docs/performance.md)"
    )
    parser.add_argument(
        "--update",
        default="",
        help="with --only: replace the rows of the scenarios run in this page (e.g. "
        "docs/performance.md), keeping the others and their notes",
    )
    args = parser.parse_args()
    configure_logging("bench", level="warning", json=False)
    report = asyncio.run(run(args))
    command = "python -m bench" + (" --quick" if args.quick else "")
    command += f" --only '{args.only}'" if args.only else ""
    if command == "python -m bench":
        command = "make bench"
    if args.update:
        page = pathlib.Path(args.update)
        command += f" --update {args.update}"
        page.write_text(report.merged(page.read_text(), command))
        print(f"updated {args.update}")
        return 0
    out = args.out or ("" if args.only else "docs/performance.md")
    if out:
        pathlib.Path(out).write_text(report.markdown(command))
        print(f"wrote {out}")
    else:
        print(report.markdown(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
