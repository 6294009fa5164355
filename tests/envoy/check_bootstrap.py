#!/usr/bin/env python3
"""Reads an Envoy bootstrap file (YAML) as Envoy reads it, with Envoy's own published protos
(PyPI `xds-protos`): every field name, every value's type and every enum name must be what
`envoy.config.bootstrap.v3.Bootstrap` and the messages it reaches accept, and every
`typed_config` / `typed_extension_protocol_options` entry must name (`@type`) a message Envoy
publishes, read with that message's own fields. Envoy cannot be installed here; its schema can.

    python3 tests/envoy/check_bootstrap.py envoy.yaml

Prints `envoy bootstrap: ok (N typed configs: ...)` or exits 1 with protobuf's error, which
names the field. Run by crates/doors/tests/doors/ext_authz.rs on the rendered shipped template.
"""
import importlib
import pkgutil
import sys

import yaml
from google.protobuf import json_format

from envoy.config.bootstrap.v3 import bootstrap_pb2


def type_urls(node):
    """Every `@type` value in the document."""
    if isinstance(node, dict):
        if "@type" in node:
            yield node["@type"]
        for value in node.values():
            yield from type_urls(value)
    elif isinstance(node, list):
        for value in node:
            yield from type_urls(value)


def load_package_of(type_url):
    """Imports every module of the type's proto package, so that json_format resolves it."""
    full_name = type_url.rsplit("/", 1)[-1]
    package = full_name.rsplit(".", 1)[0]
    try:
        module = importlib.import_module(package)
    except ImportError:
        sys.exit(f"envoy bootstrap: {type_url}: Envoy publishes no proto package {package}")
    for found in pkgutil.iter_modules(module.__path__):
        if found.name.endswith("_pb2"):
            importlib.import_module(f"{package}.{found.name}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        document = yaml.safe_load(f)
    urls = sorted(set(type_urls(document)))
    for url in urls:
        load_package_of(url)
    try:
        json_format.ParseDict(document, bootstrap_pb2.Bootstrap())
    except json_format.ParseError as e:
        sys.exit(f"envoy bootstrap: {e}")
    names = ", ".join(u.rsplit(".", 1)[-1] for u in urls)
    print(f"envoy bootstrap: ok ({len(urls)} typed configs: {names})")


if __name__ == "__main__":
    main()
