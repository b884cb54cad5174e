"""``host:port`` as a URL or an operator reads it: the one place that writes an address."""


def host_port(host: str, port: int) -> str:
    """``127.0.0.1:9100``, ``[::1]:9100``: an IPv6 address in brackets (RFC 3986), or its last
    group reads as the port and a browser or Prometheus cannot use the URL."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"
