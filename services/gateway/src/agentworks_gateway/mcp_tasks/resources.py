"""A call's files and a conversation's transcript as MCP resources (M3).

Two URI templates (RFC 6570), listed by `resources/templates/list` and read with
`resources/read` as the caller (A3: the services decide what the caller may see):

- `agentworks://calls/{call_id}/files/{name}{?offset,limit}`: one page of the file,
  as `functions` action=read pages it (F8); `_meta` has `next_offset` while more
  remains (none at the end).
- `agentworks://conversations/{conversation_id}/transcript{?cursor,limit}`: one page
  of the transcript as JSON, as the `transcript` tool pages it; `_meta` has
  `next_cursor`.

Nothing is listed by `resources/list`: which calls and conversations there are is
the `list` tool's to say; tool results link to files (`resource_link`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import mcp_types as types
from mcp.shared.exceptions import MCPError

from agentworks_gateway.mcp_tasks.access import Access, Ctx, as_protocol_errors
from agentworks_gateway.tools.transcript import transcript

FILE_TEMPLATE = "agentworks://calls/{call_id}/files/{name}{?offset,limit}"
TRANSCRIPT_TEMPLATE = "agentworks://conversations/{conversation_id}/transcript{?cursor,limit}"

TEMPLATES = [
    types.ResourceTemplate(
        name="call_file",
        title="A function call's output file",
        uri_template=FILE_TEMPLATE,
        description="One page of a file a function call produced (offset: the byte to start "
        "at, limit: bytes per page); the page's _meta.next_offset is where the next page "
        "starts, absent at the end. Text files read as text, others as a base64 blob.",
    ),
    types.ResourceTemplate(
        name="conversation_transcript",
        title="A conversation's transcript",
        uri_template=TRANSCRIPT_TEMPLATE,
        description="One page of a conversation's transcript as JSON (the transcript tool's "
        "result); pass _meta.next_cursor back as cursor for the next page.",
        mime_type="application/json",
    ),
]


def _query_int(query: dict[str, list[str]], name: str) -> int:
    value = (query.get(name) or ["0"])[0]
    if not value.isdigit():
        raise MCPError(types.INVALID_PARAMS, f"{name} must be a whole number (got {value!r})")
    return int(value)


def _parse(uri: str) -> tuple[str, list[str], dict[str, list[str]]]:
    parts = urlsplit(uri)
    if parts.scheme != "agentworks":
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}: " + _TEMPLATES_TEXT)
    segments = [unquote(s) for s in parts.path.split("/")[1:]]
    return parts.netloc, segments, parse_qs(parts.query)


_TEMPLATES_TEXT = f"the resources are {FILE_TEMPLATE} and {TRANSCRIPT_TEMPLATE}"


async def _read_file(
    calls: Access, ctx: Ctx, uri: str, call_id: str, name: str, query: dict[str, list[str]]
) -> types.ReadResourceResult:
    with as_protocol_errors(f"cannot read {uri}"):
        page = await calls.functions(ctx).read_file(
            call_id, name, offset=_query_int(query, "offset"), limit=_query_int(query, "limit")
        )
    meta: dict[str, Any] = {"offset": page.offset, "size": page.size}
    if page.HasField("next_offset"):
        meta["next_offset"] = page.next_offset
    mime = page.media_type or None
    if page.WhichOneof("data") == "content_base64":
        blob = types.BlobResourceContents(
            uri=uri, mime_type=mime, blob=page.content_base64, _meta=meta
        )
        return types.ReadResourceResult(contents=[blob])
    text = types.TextResourceContents(uri=uri, mime_type=mime, text=page.content, _meta=meta)
    return types.ReadResourceResult(contents=[text])


async def _read_transcript(
    calls: Access, ctx: Ctx, uri: str, conversation_id: str, query: dict[str, list[str]]
) -> types.ReadResourceResult:
    args: dict[str, Any] = {"conversation_id": conversation_id}
    if query.get("cursor"):
        args["cursor"] = query["cursor"][0]
    if limit := _query_int(query, "limit"):
        args["limit"] = limit
    with as_protocol_errors(f"cannot read {uri}"):
        page = await transcript(calls.gateway, calls.caller(ctx), args)
    text = types.TextResourceContents(
        uri=uri,
        mime_type="application/json",
        text=json.dumps(page, ensure_ascii=False),
        _meta={"next_cursor": page["next_cursor"]},
    )
    return types.ReadResourceResult(contents=[text])


class CallResources:
    """The `resources/*` handlers."""

    def __init__(self, calls: Access) -> None:
        self.calls = calls

    async def list(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)

    async def read(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        kind, segments, query = _parse(uri)
        if kind == "calls" and len(segments) == 3 and segments[1] == "files" and segments[0]:
            return await _read_file(self.calls, ctx, uri, segments[0], segments[2], query)
        if kind == "conversations" and segments[1:] == ["transcript"] and segments[0]:
            return await _read_transcript(self.calls, ctx, uri, segments[0], query)
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}: " + _TEMPLATES_TEXT)
