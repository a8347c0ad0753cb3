#!/usr/bin/env python3
"""The API's enums are core's one table of names (core/algo/names.h).

`recond-worker --names` prints the table (one list per set, in the order
messages show them); every enum of api/openapi.yaml that names one of these
choices must be the same list, so that the contract, the spec parser, the
engine selection and the error messages cannot drift apart."""

import json
import subprocess

from recond_harness import OPENAPI, WORKER, check, require_binaries, run_main


def schema(doc, name):
    return doc["components"]["schemas"][name]["properties"]


def volume_format_enum(doc):
    params = doc["paths"]["/v1/jobs/{id}/volume"]["parameters"]
    return next(p for p in params if isinstance(p, dict) and p.get("name") == "format")["schema"]["enum"]


def main():
    require_binaries(WORKER)
    import yaml  # python3-yaml
    with open(OPENAPI) as f:
        doc = yaml.safe_load(f)
    out = subprocess.run([WORKER, "--names"], check=True, capture_output=True, timeout=60).stdout
    table = json.loads(out)

    where = {
        "engine": ("Execution.engine", schema(doc, "Execution")["engine"]["enum"]),
        "precision": ("Execution.precision", schema(doc, "Execution")["precision"]["enum"]),
        "algorithm": ("Algorithm.name", schema(doc, "Algorithm")["name"]["enum"]),
        "window": ("Algorithm.window", schema(doc, "Algorithm")["window"]["enum"]),
        "scan": ("Algorithm.scan", schema(doc, "Algorithm")["scan"]["enum"]),
        "projector": ("Algorithm.projector", schema(doc, "Algorithm")["projector"]["enum"]),
        "geometry": ("Geometry.type", schema(doc, "Geometry")["type"]["enum"]),
        "format": ("GET /v1/jobs/{id}/volume format", volume_format_enum(doc)),
        "device_engine": ("Device.engine", schema(doc, "Device")["engine"]["enum"]),
    }
    check("--names prints every set the API names", sorted(table) == sorted(where),
          "table %s, api %s" % (sorted(table), sorted(where)))
    for key, (what, enum) in sorted(where.items()):
        check("%s of api/openapi.yaml equals core's table (%s)" % (what, key), enum == table.get(key),
              "api %s, table %s" % (enum, table.get(key)))
    # Defaults are words of the table too.
    for what, prop, key in (("Execution.engine", schema(doc, "Execution")["engine"], "engine"),
                            ("Execution.precision", schema(doc, "Execution")["precision"], "precision"),
                            ("Algorithm.window", schema(doc, "Algorithm")["window"], "window"),
                            ("Algorithm.scan", schema(doc, "Algorithm")["scan"], "scan"),
                            ("Algorithm.projector", schema(doc, "Algorithm")["projector"], "projector")):
        check("default of %s is in the table" % what, prop.get("default") in table.get(key, []),
              str(prop.get("default")))


run_main(main)
