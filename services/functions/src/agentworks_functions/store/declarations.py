"""Targets' owners and running limits, and declared functions (F1, F2, F5)."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from agentworks.core.errors import (
    Conflict,
    NotFound,
    Reason,
)
from agentworks_functions.models import (
    Function,
    FunctionSpec,
    Target,
    TargetKey,
)
from agentworks_functions.store.base import FunctionsStoreBase, Q
from agentworks_functions.store.rows import _function, _target


class DeclarationQueries(FunctionsStoreBase):
    async def put_target(self, key: TargetKey, owner: str, running_limit: int) -> Target:
        params = {"kind": key.kind, "name": key.name}
        async with self.db.raw(transaction=True) as pg:
            # B10: a name stored before names had to be lower-case, differing only by case.
            other = await Q.value(
                pg, "look_alike_target", {**params, "lower_name": key.name.lower()}
            )
            if other is not None:
                raise Conflict(
                    f"{key} differs only by case from the registered {key.kind}:{other}; "
                    "names that look alike are refused (a spoofing aid): choose another",
                    reason=Reason.NAME_TAKEN,
                    metadata={"field": "ref.name", "existing": f"{key.kind}:{other}"},
                )
            row = await Q.one(
                pg, "put_target", {**params, "owner": owner, "running_limit": running_limit}
            )
            return _target(row, self.default_running_limit)

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_target", {"kind": key.kind, "name": key.name})
        if row is None:
            raise NotFound(f"{key} is not registered with the functions service")
        return _target(row, self.default_running_limit)

    async def put_function(self, spec: FunctionSpec) -> Function:
        # JSON columns keep JSON null for None, as they always did.
        params = {
            "target_kind": spec.target.kind,
            "target_name": spec.target.name,
            "name": spec.name,
            "description": spec.description,
            "input_schema": Jsonb(spec.input_schema),
            "output_schema": Jsonb(spec.output_schema),
            "allowed_callers": list(spec.allowed_callers),
            "starts_work": spec.starts_work,
            "workflow": Jsonb(spec.workflow.as_json() if spec.workflow else None),
        }
        async with self.db.raw() as pg:
            return _function(await Q.one(pg, "put_function", params))

    async def delete_function(self, key: TargetKey, name: str) -> bool:
        params = {"kind": key.kind, "target_name": key.name, "name": name}
        async with self.db.raw() as pg:
            return bool(await Q.execute(pg, "delete_function", params))

    async def get_function(self, key: TargetKey, name: str) -> Function | None:
        params = {"kind": key.kind, "target_name": key.name, "name": name}
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_function", params)
        return _function(row) if row else None

    async def list_functions(self, key: TargetKey) -> list[Function]:
        async with self.db.raw() as pg:
            rows = await Q.all(pg, "list_functions", {"kind": key.kind, "target_name": key.name})
        return [_function(r) for r in rows]
