"""Following a call once it is made: its status and pages, waiting for a change (F7,
F11), reading its files (F8), replying to its question (F11) and cancelling it (F15)."""

from __future__ import annotations

import time

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import InvalidArgument, NotFound, Reason, rule_meta
from agentworks.core.identity import Identity
from agentworks_functions.models import FilePage, StatusView
from agentworks_functions.service.base import FunctionsServiceBase
from agentworks_functions.service.rules import (
    EVENT_LIMIT_DEFAULT,
    MESSAGE_LIMIT_DEFAULT,
    READ_LIMIT_DEFAULT,
    check_file_name,
    log,
    notice_text,
    sees_call,
    text_page,
)
from agentworks_functions.store import CALL_CHANNEL, call_not_found, ended_key


class Following(FunctionsServiceBase):
    """The use cases of a call after it is made, of `FunctionsService`."""

    async def status(
        self,
        identity: Identity,
        *,
        call_id: str,
        after: int = -1,
        message_limit: int = 0,
        after_event: int = -1,
        event_limit: int = 0,
        wait_seconds: int = 0,
        seen_version: int | None = None,
        until_ended: bool = False,
    ) -> StatusView:
        """The call's record with both pagings; optionally wait for a change (F7, F11).

        `until_ended` waits for the end of the call only, through any other change.
        """
        for field, value in (("after", after), ("after_event", after_event)):
            if value < -1:
                raise InvalidArgument(
                    f"{field} must be -1 (from the start) or a next_{field}",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta(field, "gte", -1),
                )
        # The pages' and the wait's ranges are the proto's rules (GetStatusRequest); 0 is
        # the default.
        message_limit = message_limit or MESSAGE_LIMIT_DEFAULT
        event_limit = event_limit or EVENT_LIMIT_DEFAULT
        deadline = time.monotonic() + wait_seconds
        page = (after, message_limit, after_event, event_limit)
        keys = [ended_key(call_id) if until_ended else call_id]
        with self.listener.subscribe(CALL_CHANNEL, keys) as waiter:
            view, owner = await self.store.status(
                call_id,
                after=after,
                message_limit=message_limit,
                after_event=after_event,
                event_limit=event_limit,
            )
            # A3: the caller, the target's owner and the operator; else NOT_FOUND.
            if not sees_call(identity, view.call.caller, owner):
                raise call_not_found(call_id)
            await self._check_capability_sees(identity, view.call)
            if until_ended:
                return await self._until_ended(waiter, call_id, deadline, view, page) or view
            baseline = view.call.version if seen_version is None else seen_version
            while (
                wait_seconds
                and view.call.is_open
                and not view.messages
                and not view.events
                and view.call.version <= baseline
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.draining.is_set():
                    break
                await waiter.wait(min(remaining, self.poll_fallback_seconds))
                view = await self._view(call_id, *page)
        return view

    async def read_file(
        self, identity: Identity, *, call_id: str, file: str, offset: int, limit: int
    ) -> FilePage:
        """A bounded page of one output file, by byte offset (F8)."""
        limit = limit or READ_LIMIT_DEFAULT  # its range is the proto's rule (ReadFileRequest)
        if offset < 0:
            raise InvalidArgument(
                f"offset must be 0 or more, got {offset}",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("offset", "gte", 0),
            )
        await self._check_reader(identity, call_id, owners_only="read its files")
        await self._check_capability_sees(identity, await self.store.get_call(call_id))
        name = check_file_name(file, call_id)
        info = await self.store.file_info(call_id, name)
        if info is None:
            raise NotFound(
                f"file {name!r} not found in call {call_id}: status lists the call's files",
                reason=Reason.NOT_FOUND,
                metadata={"kind": "file", "id": name, "call_id": call_id},
            )
        if offset > info.size:
            raise InvalidArgument(
                f"offset {offset} is past the end of {name} ({info.size} bytes); "
                "start at 0 and follow next_offset",
                reason=Reason.INVALID_VALUE,
                metadata={**rule_meta("offset", "lte", info.size)},
            )
        data = await self.store.blobs.read(info.blob_id, offset, limit)
        as_text = None
        if info.is_text:
            as_text, data = text_page(data, more=offset + len(data) < info.size)
        end = offset + len(data)
        return FilePage(
            name=name,
            data=data,
            as_text=as_text,
            offset=offset,
            size=info.size,
            next_offset=end if end < info.size else None,
            media_type=info.media_type,
        )

    async def reply(self, identity: Identity, *, call_id: str, text: str) -> StatusView:
        """Answer the pending human-input question; the execution goes on (F11)."""
        if not text.strip():
            raise InvalidArgument(
                "text is empty: the reply to the pending question",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("text", "required"),
            )
        check_no_nul(text, "text")  # its size is the proto's rule (ReplyRequest)
        await self._check_reader(identity, call_id, owners_only="answer its question")
        await self._check_capability_sees(identity, await self.store.get_call(call_id))
        await self.store.reply(call_id, identity.principal, text)
        log.info("call.replied", call_id=call_id)
        return await self.status(identity, call_id=call_id)

    async def cancel(self, identity: Identity, *, call_id: str) -> StatusView:
        """End an open call as cancelled; the runtime learns it on its next report (F15).

        The operator may cancel anyone's call: it finds the calls holding a target's
        running limit with ListCalls and frees the slots (V1)."""
        await self._check_reader(identity, call_id)
        await self.store.cancel(call_id, identity.principal, notice_text)
        log.info("call.cancelled", call_id=call_id)
        return await self.status(identity, call_id=call_id)
