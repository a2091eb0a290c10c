"""Registering targets and declaring functions (F1, F2, F5)."""

from __future__ import annotations

import json

from agentworks.core.checks import check_lower_case
from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    kind_meta,
    rule_meta,
)
from agentworks.core.identity import Identity, check_new_principal
from agentworks.core.limits import (
    MAX_ALLOWED_CALLERS,
    MAX_DESCRIPTION_BYTES,
    MAX_RUNNING_LIMIT,
    MAX_SCHEMA_BYTES,
)
from agentworks_functions.models import (
    Function,
    FunctionSpec,
    Target,
    TargetKey,
)
from agentworks_functions.schemas import (
    check_caller_patterns,
    check_schema,
    check_workflow_binding,
    closed_inputs,
    may_call,
)
from agentworks_functions.service.base import FunctionsServiceBase
from agentworks_functions.service.rules import (
    _FUNCTION_RE,
    _NAME_RE,
    check_size,
    log,
)


class Declarations(FunctionsServiceBase):
    async def register_target(
        self, identity: Identity, key: TargetKey, owner: str, running_limit: int
    ) -> Target:
        if not identity.is_operator:
            raise PermissionDenied(
                "registering a target needs the operator role",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "operator"},
            )
        check_lower_case(key.name, "ref.name")  # B10: new names are lower-case
        check_new_principal(owner, "owner")
        if not 0 <= running_limit <= MAX_RUNNING_LIMIT:
            raise InvalidArgument(
                f"running_limit must be 0 (the service default) to {MAX_RUNNING_LIMIT}, "
                f"got {running_limit}",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("running_limit", "range", MAX_RUNNING_LIMIT),
            )
        target = await self.store.put_target(key, owner, running_limit)
        log.info("target.registered", target=str(key), owner=owner, running_limit=running_limit)
        return target

    async def get_target(self, identity: Identity, key: TargetKey) -> Target:
        return await self.store.get_target(key)

    async def declare_function(self, identity: Identity, spec: FunctionSpec) -> Function:
        """Create or replace a function; schemas are checked here, not at call time (F1)."""
        await self._owned_target(identity, spec.target)
        if not _FUNCTION_RE.match(spec.name or ""):
            raise InvalidArgument(
                f"function name {spec.name!r} is not valid: 1-64 letters, digits, '_', '.' or "
                "'-', starting with a letter",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("name", "pattern"),
            )
        check_size(spec.description, "description", MAX_DESCRIPTION_BYTES)
        if spec.input_schema is None:
            raise InvalidArgument(
                'input_schema is required; a function without inputs declares {"type": '
                '"object", "additionalProperties": false}',
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("input_schema", "required"),
            )
        for field, schema in (
            ("input_schema", spec.input_schema),
            ("output_schema", spec.output_schema),
        ):
            if schema is not None and len(json.dumps(schema).encode()) > MAX_SCHEMA_BYTES:
                raise InvalidArgument(
                    f"{field} is larger than {MAX_SCHEMA_BYTES} bytes as JSON",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta(field, "json.max_bytes", MAX_SCHEMA_BYTES),
                )
        check_schema(spec.input_schema, "input_schema", require_object=True)
        if spec.output_schema is not None:
            check_schema(spec.output_schema, "output_schema", require_object=False)
        if len(spec.allowed_callers) > MAX_ALLOWED_CALLERS:
            raise InvalidArgument(
                f"allowed_callers has more than {MAX_ALLOWED_CALLERS} entries",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("allowed_callers", "repeated.max_items", MAX_ALLOWED_CALLERS),
            )
        allowed = check_caller_patterns(spec.allowed_callers)
        workflow = spec.workflow
        if spec.target.kind == "workflow":
            if workflow is None:
                raise InvalidArgument(
                    "a workflow function needs workflow.route (and optionally allowed_groups "
                    "and typed variables)",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("workflow.route", "required"),
                )
            workflow = check_workflow_binding(workflow, spec.input_schema, _NAME_RE)
        elif workflow is not None:
            raise InvalidArgument(
                "workflow is only for functions of workflow targets, not crews",
                reason=Reason.INVALID_VALUE,
                metadata=rule_meta("workflow"),
            )
        function = await self.store.put_function(
            FunctionSpec(
                target=spec.target,
                name=spec.name,
                description=spec.description,
                input_schema=closed_inputs(spec.input_schema),
                output_schema=spec.output_schema,
                allowed_callers=allowed,
                starts_work=spec.starts_work,
                workflow=workflow,
            )
        )
        log.info("function.declared", target=str(spec.target), function=spec.name)
        return function

    async def remove_function(self, identity: Identity, key: TargetKey, name: str) -> None:
        await self._owned_target(identity, key)
        if not _FUNCTION_RE.match(name or "") or not await self.store.delete_function(key, name):
            raise NotFound(
                f"function {name!r} not found on {key}",
                reason=Reason.NOT_FOUND,
                metadata=kind_meta("function", name),
            )
        log.info("function.removed", target=str(key), function=name)

    async def list_functions(self, identity: Identity, key: TargetKey) -> list[Function]:
        """The functions this caller may invoke (F2); the built-in ask is never one (F1).
        A turn's capability lists as its agent; an execution's while it is live (T3)."""
        if identity.capability is not None and identity.capability.kind == "execution":
            await self._live_execution(identity)
        target = await self.store.get_target(key)
        return [
            f
            for f in await self.store.list_functions(key)
            if may_call(identity.principal, target.owner, f.allowed_callers)
        ]
