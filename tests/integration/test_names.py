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


def variants_enum(doc, name, key):
    """The values of key over the oneOf variants of schema name, in order (each variant names its own)."""
    out = []
    for v in doc["components"]["schemas"][name]["oneOf"]:
        out += doc["components"]["schemas"][v["$ref"].split("/")[-1]]["properties"][key]["enum"]
    return out


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
        "algorithm": ("AlgorithmName", doc["components"]["schemas"]["AlgorithmName"]["enum"]),
        "window": ("IterativeAlgorithm.window", schema(doc, "IterativeAlgorithm")["window"]["enum"]),
        "scan": ("IterativeAlgorithm.scan", schema(doc, "IterativeAlgorithm")["scan"]["enum"]),
        "projector": ("IterativeAlgorithm.projector", schema(doc, "IterativeAlgorithm")["projector"]["enum"]),
        "initial": ("IterativeAlgorithm.initial", schema(doc, "IterativeAlgorithm")["initial"]["enum"]),
        "extend": ("IterativeAlgorithm.extend", schema(doc, "IterativeAlgorithm")["extend"]["enum"]),
        "geometry": ("GeometryType", doc["components"]["schemas"]["GeometryType"]["enum"]),
        "detector_shape": ("DetectorShape", doc["components"]["schemas"]["DetectorShape"]["enum"]),
        "format": ("GET /v1/jobs/{id}/volume format", volume_format_enum(doc)),
        "device_engine": ("Device.engine", schema(doc, "Device")["engine"]["enum"]),
    }
    # Geometry and Algorithm are one variant per kind: together they name each value once.
    # (rtk is no geometry of core's: spec.c reads RTK's XML into cone or matrices)
    for name, key, full in (("Geometry", "type", "GeometryType"), ("Algorithm", "name", "AlgorithmName")):
        got = [v for v in variants_enum(doc, name, key) if not (name == "Geometry" and v == "rtk")]
        want = doc["components"]["schemas"][full]["enum"]
        check("the %s variants' %s values are %s's, each once" % (name, key, full),
              sorted(got) == sorted(want) and len(got) == len(set(got)), "variants %s, %s %s" % (got, full, want))
    for key in ("window", "scan"):
        check("FdkAlgorithm.%s equals IterativeAlgorithm.%s" % (key, key),
              schema(doc, "FdkAlgorithm")[key] == schema(doc, "IterativeAlgorithm")[key])
    check("--names prints every set the API names", sorted(table) == sorted(where),
          "table %s, api %s" % (sorted(table), sorted(where)))
    for key, (what, enum) in sorted(where.items()):
        check("%s of api/openapi.yaml equals core's table (%s)" % (what, key), enum == table.get(key),
              "api %s, table %s" % (enum, table.get(key)))
    # Defaults are words of the table too.
    it = schema(doc, "IterativeAlgorithm")
    for what, prop, key in (("Execution.engine", schema(doc, "Execution")["engine"], "engine"),
                            ("Execution.precision", schema(doc, "Execution")["precision"], "precision"),
                            ("IterativeAlgorithm.window", it["window"], "window"),
                            ("IterativeAlgorithm.scan", it["scan"], "scan"),
                            ("IterativeAlgorithm.projector", it["projector"], "projector"),
                            ("IterativeAlgorithm.extend", it["extend"], "extend"),
                            ("DetectorShape", doc["components"]["schemas"]["DetectorShape"], "detector_shape")):
        check("default of %s is in the table" % what, prop.get("default") in table.get(key, []),
              str(prop.get("default")))


run_main(main)
