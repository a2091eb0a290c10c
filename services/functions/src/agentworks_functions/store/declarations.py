"""Targets' owners and running limits, and declared functions (F1, F2, F5)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.core.errors import (
    Conflict,
    NotFound,
)
from agentworks_functions import tables as t
from agentworks_functions.models import (
    Function,
    FunctionSpec,
    Target,
    TargetKey,
)
from agentworks_functions.store.base import FunctionsStoreBase
from agentworks_functions.store.rows import _function, _target


class DeclarationQueries(FunctionsStoreBase):
    async def put_target(self, key: TargetKey, owner: str, running_limit: int) -> Target:
        stmt = (
            pg_insert(t.targets)
            .values(kind=key.kind, name=key.name, owner=owner, running_limit=running_limit)
            .on_conflict_do_update(
                index_elements=["kind", "name"],
                set_={"owner": owner, "running_limit": running_limit, "updated_at": sa.func.now()},
            )
            .returning(*t.targets.c)
        )
        # B10: a name stored before names had to be lower-case, differing only by case.
        look_alike = (
            sa.select(t.targets.c.name)
            .where(t.targets.c.kind == key.kind)
            .where(sa.func.lower(t.targets.c.name) == key.name.lower())
            .where(t.targets.c.name != key.name)
            .limit(1)
        )
        async with self.db.transaction() as conn:
            other = (await conn.execute(look_alike)).scalar_one_or_none()
            if other is not None:
                raise Conflict(
                    f"{key} differs only by case from the registered {key.kind}:{other}; "
                    "names that look alike are refused (a spoofing aid): choose another",
                    metadata={"field": "ref.name", "existing": f"{key.kind}:{other}"},
                )
            return _target((await conn.execute(stmt)).one(), self.default_running_limit)

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.autocommit() as conn:
            row = (
                await conn.execute(
                    sa.select(t.targets).where(
                        t.targets.c.kind == key.kind, t.targets.c.name == key.name
                    )
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered with the functions service")
        return _target(row, self.default_running_limit)

    async def put_function(self, spec: FunctionSpec) -> Function:
        values = {
            "description": spec.description,
            "input_schema": spec.input_schema,
            "output_schema": spec.output_schema,
            "allowed_callers": list(spec.allowed_callers),
            "starts_work": spec.starts_work,
            "workflow": spec.workflow.as_json() if spec.workflow else None,
        }
        stmt = (
            pg_insert(t.functions)
            .values(
                target_kind=spec.target.kind, target_name=spec.target.name, name=spec.name, **values
            )
            .on_conflict_do_update(
                index_elements=["target_kind", "target_name", "name"],
                set_={**values, "updated_at": sa.func.now()},
            )
            .returning(*t.functions.c)
        )
        async with self.db.transaction() as conn:
            return _function((await conn.execute(stmt)).one())

    async def delete_function(self, key: TargetKey, name: str) -> bool:
        f = t.functions
        async with self.db.transaction() as conn:
            result = await conn.execute(
                f.delete().where(
                    f.c.target_kind == key.kind, f.c.target_name == key.name, f.c.name == name
                )
            )
        return bool(result.rowcount)

    async def get_function(self, key: TargetKey, name: str) -> Function | None:
        f = t.functions
        async with self.db.autocommit() as conn:
            row = (
                await conn.execute(
                    sa.select(f).where(
                        f.c.target_kind == key.kind, f.c.target_name == key.name, f.c.name == name
                    )
                )
            ).one_or_none()
        return _function(row) if row else None

    async def list_functions(self, key: TargetKey) -> list[Function]:
        f = t.functions
        async with self.db.autocommit() as conn:
            rows = (
                await conn.execute(
                    sa.select(f)
                    .where(f.c.target_kind == key.kind, f.c.target_name == key.name)
                    .order_by(f.c.name)
                )
            ).all()
        return [_function(r) for r in rows]
