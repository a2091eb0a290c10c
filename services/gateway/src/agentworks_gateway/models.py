"""The gateway's domain types: what its store returns and its tools show."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class TokenRecord:
    """One stored API token, without its secret."""

    token_id: str
    label: str
    principal: str
    roles: frozenset[str]
    created_by: str
    created_at: datetime
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    # A runtime credential's targets (T2); None for an API token.
    targets: tuple[str, ...] | None = None
    expires_at: datetime | None = None
    # A runtime credential's last exchange (V1); None if never, and for API tokens.
    last_seen_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        """True once the token was revoked."""
        return self.revoked_at is not None

    @property
    def is_runtime_credential(self) -> bool:
        return self.targets is not None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON the tools return."""
        return {
            "token_id": self.token_id,
            "label": self.label,
            "principal": self.principal,
            "roles": sorted(self.roles),
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "revoked_by": self.revoked_by,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            **(
                {
                    "targets": list(self.targets),
                    "last_seen_at": self.last_seen_at.isoformat() if self.last_seen_at else None,
                }
                if self.targets is not None
                else {}
            ),
        }


@dataclass(frozen=True)
class ConsoleSession:
    """A web console session (V3): its CSRF token, its expiry and the token it acts as."""

    csrf_token: str
    expires_at: datetime
    token: TokenRecord
