"""Which network addresses an outbound connection may reach: global ones only, judged after
unwrapping the IPv6 forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64,
Teredo), since `ipaddress` calls `::ffff:127.0.0.1` not loopback and `64:ff9b::7f00:1` global."""

from __future__ import annotations

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (and so reaches), none for a plain IPv6 one."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in network for network in _NAT64) or (address in _IPV4_COMPATIBLE and int(address) > 1):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def address_problem(address: IPAddress) -> str:
    """Why `address` may not be reached from the server ("" when it is a global address): loopback,
    private, link-local (169.254.169.254, the cloud metadata service), shared, reserved, multicast or
    unspecified, itself or in the IPv4 address it carries."""
    if address.version == 6 and isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return f"{address} is a link-local address with a zone"
        for inner in embedded_ipv4(address):
            if problem := address_problem(inner):
                return f"{address} carries {inner}: {problem}"
        if embedded_ipv4(address):
            return ""
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_link_local:
        return f"{address} is a link-local address (the cloud metadata service lives there)"
    if address.is_unspecified or address.is_multicast or address.is_reserved:
        return f"{address} is not a unicast address"
    if address.is_private or not address.is_global:
        return f"{address} is a private or non-global address"
    return ""


def literal_address(host: str) -> IPAddress | None:
    """The address a URL host names without any lookup: dotted, IPv6 (brackets stripped), and the
    forms C's inet_aton takes (decimal 2130706433, hex 0x7f000001, octal 0177.0.0.1, 127.1); None for
    a name."""
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
