"""Render the ValidatingWebhookConfiguration from ``manifests/webhook.yaml.j2``.

The charm points the webhook at the application's Service; the end-to-end tests, which have no
cluster network, point it at ``https://127.0.0.1:<port><WEBHOOK_PATH>``. Both go through this
function, so the object the API server sees is the same apart from ``clientConfig``.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import jinja2
import yaml

TEMPLATE_NAME = "webhook.yaml.j2"


@cache
def _template() -> jinja2.Template:
    source = resources.files("aitenant").joinpath("manifests", TEMPLATE_NAME).read_text("utf-8")
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    # A JSON string is a valid YAML scalar: no value can break the document's structure.
    env.filters["q"] = lambda value: json.dumps(str(value))
    return env.from_string(source)


def render_webhook_configuration(
    *,
    name: str,
    ca_bundle_pem: bytes,
    url: str | None = None,
    service_name: str | None = None,
    service_namespace: str | None = None,
    service_port: int = 443,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration ``name`` as a dict, ready to apply.

    Give either ``url`` (an ``https://`` URL including the AITenant webhook path) or
    ``service_name`` and ``service_namespace`` (the path is added). ``ca_bundle_pem`` is the
    PEM of the CA that signed the serving certificate; empty means "use the API server's trust
    roots".
    """
    if not name:
        raise ValueError("name is required")
    if url and (service_name or service_namespace):
        raise ValueError("give either url or service_name/service_namespace, not both")
    if url:
        if urlsplit(url).scheme != "https":
            raise ValueError(f"webhook url must use https, got {url!r}")
    elif not (service_name and service_namespace):
        raise ValueError("give url, or both service_name and service_namespace")
    if not 1 <= service_port <= 65535:
        raise ValueError(f"service_port must be between 1 and 65535, got {service_port}")
    rendered = _template().render(
        name=name,
        ca_bundle=base64.b64encode(ca_bundle_pem).decode("ascii"),
        url=url or "",
        service_name=service_name or "",
        service_namespace=service_namespace or "",
        service_port=service_port,
    )
    document = yaml.safe_load(rendered)
    if not isinstance(document, dict):
        raise ValueError(f"{TEMPLATE_NAME} did not render to a mapping")
    return document
