"""The client's address behind the reverse proxies the settings trust (CONCORD_TRUSTED_PROXIES).

Used wherever Concord limits or logs by address: participant entry and password log-ins.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from django.conf import settings
from django.http import HttpRequest


def client_address(meta: Mapping[str, str]) -> str:
    """Return the client's address from a request's META, honouring trusted proxies only.

    With `CONCORD_TRUSTED_PROXIES` empty (the default) this is REMOTE_ADDR: a client can never
    choose its own address by sending a header. When REMOTE_ADDR is one of the trusted proxies
    (addresses or networks), the address is the right-most entry of X-Forwarded-For that is not a
    trusted proxy itself: each proxy appends the address it saw, so entries left of a trusted
    proxy's own could be forged by the client and are not read.
    """
    remote = str(meta.get("REMOTE_ADDR", "")) or "unknown"
    networks = _trusted_networks()
    if not networks or not _in_networks(remote, networks):
        return remote
    hops = [hop.strip() for hop in str(meta.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    for hop in reversed([hop for hop in hops if hop]):
        if not _is_address(hop):
            return remote  # not what a proxy writes: do not trust the header at all
        if not _in_networks(hop, networks):
            return hop
    return remote


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _trusted_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(value, strict=False) for value in settings.CONCORD_TRUSTED_PROXIES]


def _in_networks(
    address: str, networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def request_client_address(request: HttpRequest) -> str | None:
    """`client_address` of a request (django-axes calls this as AXES_CLIENT_IP_CALLABLE); None
    for a request built without an address (the test client's `login`)."""
    if not request.META.get("REMOTE_ADDR"):
        return None
    return client_address(request.META)
