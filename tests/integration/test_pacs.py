#!/usr/bin/env python3
"""DICOM out and into a real PACS: recond's CT series checked by Orthanc
(Debian's orthanc + orthanc-dicomweb, started here on loopback with a
throwaway directory), by pydicom and by dciodvfy (dicom3tools), all
independent of recond's C code.

Data: analytic cone-beam projections (phantom.py) of a water ellipsoid
(mu = 0.0192/mm, the default mu of water, so HU 0) in air (HU -1000) with a
denser insert (mu 2x water: HU +1000) off centre, on a 32 x 28 x 24 grid
(rows != columns != slices, so a swapped axis shows).  FDK on the CPU.

What is checked:
- bad DICOM fields and unknown destinations are 400s naming the field;
- GET /v1/destinations lists names and kinds, never the password;
- the job's event stream follows the push after succeeded and ends once
  it is sent;
- a job pushed by STOW-RS (with basic auth) and one by C-STORE reach
  Orthanc: instance count, patient and study fields, geometry attributes,
  and pixel values (water 0 +- 40 HU, air -1000 +- 40 HU, insert 1000 +-
  150 HU found at its world position through Orthanc's ImagePositionPatient
  and PixelSpacing);
- the ZIP download (pydicom) equals the raw volume after rescale (to 0.5 HU
  of rounding) and names the same series UID Orthanc holds; the multipart
  download has the same instances; dciodvfy reports no error;
- a PACS that is down gives send_failed with the reason after
  push_max_attempts, the volume stays downloadable, POST push sends again;
- a push waiting for its retry is sent after a daemon restart once the
  destination is fixed (the pushes table is durable);
- the patient's name, id and birth date are never in the daemon's log or
  the audit log.
"""

import io
import json
import os
import shutil
import subprocess
import time
import zipfile

import orthanc_harness
import phantom
from recond_harness import (Daemon, check, deadline, free_port, log, read_f32, require_binaries, run_main,
                            skip, tempdir)

MU_W = 0.0192
PHANTOM = [
    ((0.0, 0.0, 0.0), (12.0, 10.0, 9.0), MU_W),
    ((5.0, -3.0, 2.0), (3.0, 3.0, 3.0), MU_W),  # insert: 2 mu_w in all, +1000 HU
]
WATER_TOL, AIR_TOL, INSERT_TOL = 40.0, 40.0, 150.0
UID_ROOT = "1.2.826.0.1.3680043.10.999"
PATIENT = {
    "patient_id": "PID-77310",
    "patient_name": "Testpatient^Jana^Q",
    "patient_birth_date": "19710203",
    "patient_sex": "F",
    "accession_number": "ACC8812",
    "study_description": "recond phantom study",
    "referring_physician": "Referrer^Rolf",
    "institution": "Loopback General",
}


def make_spec(push, dicom=None, label="pacs"):
    s = phantom.cone_spec(n=32, voxel=1.0, views=90, nu=48, nv=48, du=1.5, dv=1.5, label=label)
    s["volume"].update({"nx": 32, "ny": 28, "nz": 24})
    s["output"] = {"water_mu_per_mm": MU_W, "push": push}
    s["dicom"] = dict(dicom if dicom is not None else PATIENT)
    s["autostart"] = True
    return s


def submit(api, spec, proj):
    job = api.create(spec)
    st, _, body, _ = api.put("/v1/jobs/%s/projections" % job["id"], proj)
    if st not in (200, 201, 204):
        raise RuntimeError("upload answered %d: %s" % (st, body[:200]))
    return job["id"]


def wait_job(api, jid, done, timeout=120):
    """The job once done(job) holds, or as it is when timeout s have passed."""
    alive = deadline(timeout)
    j = api.job(jid)
    while not done(j) and alive():
        time.sleep(0.1)
        j = api.job(jid)
    return j


def wait_delivery(api, jid, want, timeout=120):
    return wait_job(api, jid, lambda j: j.get("delivery") in want, timeout)


def hu_of(mu):
    return 1000.0 * (mu - MU_W) / MU_W


def dicom_hu(ds):
    slope = float(getattr(ds, "RescaleSlope", 1))
    icpt = float(getattr(ds, "RescaleIntercept", 0))
    return [[v * slope + icpt for v in row] for row in ds.pixel_array.tolist()]


def world_value(instances, x, y, z):
    """HU at world (x, y, z) found through the instances' own geometry attributes."""
    best = min(instances, key=lambda ds: abs(float(ds.ImagePositionPatient[2]) - z))
    ipp = [float(v) for v in best.ImagePositionPatient]
    rs, cs = float(best.PixelSpacing[0]), float(best.PixelSpacing[1])
    r = int(round((y - ipp[1]) / rs))
    c = int(round((x - ipp[0]) / cs))
    return dicom_hu(best)[r][c]


def ball_mean(instances, centre, radius):
    acc, n = 0.0, 0
    for ds in instances:
        ipp = [float(v) for v in ds.ImagePositionPatient]
        rs, cs = float(ds.PixelSpacing[0]), float(ds.PixelSpacing[1])
        z = ipp[2]
        if abs(z - centre[2]) > radius:
            continue
        hu = dicom_hu(ds)
        for r, row in enumerate(hu):
            y = ipp[1] + r * rs
            for c, v in enumerate(row):
                x = ipp[0] + c * cs
                if (x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2 <= radius ** 2:
                    acc += v
                    n += 1
    return acc / n if n else float("nan")


def check_values(name, instances):
    water = ball_mean(instances, (-5.0, 3.0, -2.0), 2.5)
    air = ball_mean(instances, (14.0, 12.0, 10.0), 1.5)
    insert = world_value(instances, 5.0, -3.0, 2.0)
    mirrored = world_value(instances, -5.0, 3.0, -2.0)
    check("%s: water reads 0 HU (+-%g)" % (name, WATER_TOL), abs(water) <= WATER_TOL, "%.1f HU" % water)
    check("%s: air reads -1000 HU (+-%g)" % (name, AIR_TOL), abs(air + 1000) <= AIR_TOL, "%.1f HU" % air)
    check("%s: the insert is where its world position says (+1000 +-%g HU), its mirror is water" %
          (name, INSERT_TOL), abs(insert - 1000) <= INSERT_TOL and abs(mirrored) <= 3 * WATER_TOL,
          "insert %.0f HU, mirror %.0f HU" % (insert, mirrored))


def orthanc_series(o, patient_id):
    """(series JSON, [pydicom datasets sorted by InstanceNumber]) of the patient's only series."""
    import pydicom
    pats = [p for p in o.get("/patients?expand") if p["MainDicomTags"].get("PatientID") == patient_id]
    if len(pats) != 1:
        return None, []
    studies = pats[0]["Studies"]
    series = o.get("/studies/%s" % studies[0])["Series"]
    ser = o.get("/series/%s" % series[0])
    insts = [pydicom.dcmread(io.BytesIO(o.get_bytes("/instances/%s/file" % i))) for i in ser["Instances"]]
    insts.sort(key=lambda d: int(d.InstanceNumber))
    return ser, insts


def check_orthanc(name, o, spec, jid, api):
    d = spec["dicom"]
    ser, insts = orthanc_series(o, d["patient_id"])
    nz = spec["volume"]["nz"]
    check("%s: Orthanc holds one series of %d instances" % (name, nz), ser is not None and len(insts) == nz,
          "%d instances" % len(insts))
    if not insts:
        return None
    tags = o.get("/instances/%s/simplified-tags" % ser["Instances"][0])
    want = {"PatientName": d["patient_name"], "PatientID": d["patient_id"],
            "PatientBirthDate": d["patient_birth_date"], "PatientSex": d["patient_sex"],
            "AccessionNumber": d["accession_number"], "StudyDescription": d["study_description"],
            "Modality": "CT", "InstitutionName": d["institution"]}
    bad = {k: (tags.get(k), v) for k, v in want.items() if tags.get(k) != v}
    check("%s: patient and study fields as given" % name, not bad, str(bad))
    first, last = insts[0], insts[-1]
    v = spec["volume"]
    ok = (int(first.Rows) == v["ny"] and int(first.Columns) == v["nx"] and
          [float(x) for x in first.ImageOrientationPatient] == [1, 0, 0, 0, 1, 0] and
          [float(x) for x in first.PixelSpacing] == [1.0, 1.0] and float(first.SliceThickness) == 1.0 and
          [float(x) for x in first.ImagePositionPatient] == [-15.5, -13.5, -11.5] and
          float(last.ImagePositionPatient[2]) == 11.5 and str(first.SOPClassUID) == "1.2.840.10008.5.1.4.1.1.2" and
          str(first.SeriesInstanceUID).startswith(UID_ROOT + ".") and
          "DERIVED" in list(first.ImageType) and int(first.PixelRepresentation) == 1)
    check("%s: geometry and image attributes (rows = ny, columns = nx, corner voxel centre, spacing, "
          "orientation, z ascending, UID root, derived, signed)" % name, ok,
          "Rows %s Columns %s IPP %s..%s IOP %s PS %s ST %s UID %s ImageType %s" %
          (first.Rows, first.Columns, list(first.ImagePositionPatient), list(last.ImagePositionPatient),
           list(first.ImageOrientationPatient), list(first.PixelSpacing), first.SliceThickness,
           first.SeriesInstanceUID, list(first.ImageType)))
    check_values(name + " (read back from Orthanc)", insts)
    j = api.job(jid)
    ds = j.get("dicom_series") or {}
    check("%s: the job's dicom_series names Orthanc's series" % name,
          ds.get("series_instance_uid") == str(first.SeriesInstanceUID) and ds.get("instances") == nz, str(ds))
    return insts


def check_download(name, api, jid, spec, orthanc_insts, tmp):
    import pydicom
    st, hdrs, body, _ = api.get("/v1/jobs/%s/volume?format=dicom" % jid, timeout=120)
    check("%s: ZIP download answers 200 application/zip" % name,
          st == 200 and hdrs.get("content-type") == "application/zip", "%d %s" % (st, hdrs.get("content-type")))
    zf = zipfile.ZipFile(io.BytesIO(body))
    names = sorted(zf.namelist())
    insts = [pydicom.dcmread(io.BytesIO(zf.read(n))) for n in names]
    insts.sort(key=lambda d: int(d.InstanceNumber))
    v = spec["volume"]
    check("%s: ZIP holds %d instances named {id}/NNNNN.dcm" % (name, v["nz"]),
          len(names) == v["nz"] and all(n.startswith(jid + "/") and n.endswith(".dcm") for n in names),
          str(names[:3]))
    st, _, raw, _ = api.get("/v1/jobs/%s/volume?format=raw" % jid, timeout=60)
    vol = read_f32(raw)
    nx, ny = v["nx"], v["ny"]
    worst = 0.0
    for k, ds in enumerate(insts):
        hu = dicom_hu(ds)
        for r in range(ny):
            row = hu[r]
            for c in range(nx):
                want = max(-32768.0, min(32767.0, hu_of(vol[(k * ny + r) * nx + c])))
                worst = max(worst, abs(row[c] - want))
    check("%s: ZIP pixels equal the raw volume in HU (to 0.5 of rounding)" % name, worst <= 0.5 + 1e-6,
          "max |difference| %.3f HU" % worst)
    if orthanc_insts:
        check("%s: download and PACS hold the same series and instances" % name,
              str(insts[0].SeriesInstanceUID) == str(orthanc_insts[0].SeriesInstanceUID) and
              [str(d.SOPInstanceUID) for d in insts] == [str(d.SOPInstanceUID) for d in orthanc_insts])
    # multipart/related, as WADO-RS answers
    st, hdrs, body, _ = api.get("/v1/jobs/%s/volume?format=dicom" % jid, timeout=120,
                                headers={"Accept": 'multipart/related; type="application/dicom"'})
    ctype = hdrs.get("content-type", "")
    parts = []
    if st == 200 and "boundary=" in ctype:
        b = ctype.split("boundary=")[1].strip('"').encode()
        for chunk in body.split(b"--" + b)[1:]:
            if chunk.startswith(b"--"):
                break
            head, _, data = chunk.partition(b"\r\n\r\n")
            parts.append(data[:-2] if data.endswith(b"\r\n") else data)
    check("%s: multipart/related download has the same %d instances" % (name, v["nz"]),
          len(parts) == v["nz"] and sorted(parts) == sorted(zf.read(n) for n in names),
          "%d %s, %d parts" % (st, ctype, len(parts)))
    # dciodvfy: the DICOM standard's own checker
    if shutil.which("dciodvfy"):
        path = os.path.join(tmp, "one.dcm")
        with open(path, "wb") as f:
            f.write(zf.read(names[len(names) // 2]))
        p = subprocess.run(["dciodvfy", path], capture_output=True, text=True, timeout=60)
        errors = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("Error")]
        check("%s: dciodvfy reports no error" % name, not errors, "; ".join(errors[:5]))
    else:
        check("dciodvfy is installed (dicom3tools)", False)
    return insts


def bad_requests(api):
    base = make_spec(["pacs-web"])
    cases = [
        ("output.push[0]", {"output": {"push": ["nowhere"]}}),
        ("output.push", {"output": {"push": "pacs-web"}}),
        ("output.water_mu_per_mm", {"output": {"water_mu_per_mm": 0}}),
        ("dicom.patient_birth_date", {"dicom": {"patient_birth_date": "19711302"}}),
        ("dicom.patient_birth_date", {"dicom": {"patient_birth_date": "1971-02-03"}}),
        ("dicom.patient_name", {"dicom": {"patient_name": "Back\\slash"}}),
        ("dicom.patient_name", {"dicom": {"patient_name": "A=B"}}),
        ("dicom.patient_id", {"dicom": {"patient_id": "x" * 65}}),
        ("dicom.accession_number", {"dicom": {"accession_number": "x" * 17}}),
        ("dicom.patient_sex", {"dicom": {"patient_sex": "X"}}),
        ("dicom.study_instance_uid", {"dicom": {"study_instance_uid": "1.02.3"}}),
        ("dicom.institution", {"dicom": {"institution": "line\nbreak"}}),
        ("dicom", {"dicom": {"patient_weight": "80"}}),
    ]
    for field, change in cases:
        spec = json.loads(json.dumps(base))
        for k, v in change.items():
            spec[k] = v
        st, _, body, doc = api.post_json("/v1/jobs", spec)
        check("bad %s is a 400 naming it" % field, st == 400 and field in body.decode("utf-8", "replace"),
              "%d %s" % (st, body[:200]))
    # 64 characters of UTF-8 are 64 characters, not bytes
    spec = json.loads(json.dumps(base))
    spec["dicom"]["patient_name"] = "Ö" * 64
    spec["autostart"] = False
    st, _, body, doc = api.post_json("/v1/jobs", spec)
    check("a 64-character UTF-8 name (128 bytes) is accepted", st == 201, "%d %s" % (st, body[:200]))
    if st == 201:
        api.post_json("/v1/jobs/%s/cancel" % doc["id"], b"")
        api.delete("/v1/jobs/" + doc["id"])


def main():
    require_binaries()
    ok, why = orthanc_harness.available()
    if not ok:
        skip(why)
    try:
        import pydicom  # noqa: F401
    except ImportError:
        skip("pydicom is not installed (Debian package python3-pydicom)")
    tmp = tempdir("recond-pacs-")
    o = orthanc_harness.Orthanc(aet="ORTHANC", username="recond", password="s3cret-orthanc")
    o.start()
    log("Orthanc up in %.1f s: HTTP %d, DICOM %d" % (o.startup_s or 0, o.http_port, o.dicom_port))
    down_port = free_port()
    cfg = {
        "dicom": {"uid_root": UID_ROOT, "push_retry_s": 0.2, "push_max_attempts": 2},
        "destinations": [
            {"name": "pacs-web", "kind": "stow-rs", "url": o.dicomweb_url, "username": "recond",
             "password": "s3cret-orthanc", "timeout_s": 30},
            {"name": "pacs-dimse", "kind": "c-store", "host": "127.0.0.1", "port": o.dicom_port,
             "called_ae": "ORTHANC", "calling_ae": "RECOND-IT", "timeout_s": 30},
            {"name": "pacs-down", "kind": "stow-rs", "url": "http://127.0.0.1:%d/dicom-web" % down_port,
             "timeout_s": 5},
            {"name": "pacs-wrong-ae", "kind": "c-store", "host": "127.0.0.1", "port": o.dicom_port,
             "called_ae": "NOT-ORTHANC", "timeout_s": 10},
        ],
    }
    cfg_path = os.path.join(tmp, "recond.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    d = Daemon(config=cfg_path).start()
    api = d.api()

    st, _, body, doc = api.get("/v1/destinations")
    names = sorted(x["name"] for x in (doc or {}).get("destinations", []))
    check("GET /v1/destinations lists the configured names and kinds",
          st == 200 and names == sorted(x["name"] for x in cfg["destinations"]), "%d %s" % (st, names))
    check("GET /v1/destinations never shows a password", b"s3cret" not in body and b"password" not in body)

    bad_requests(api)

    log("projecting the phantom (pure Python) ...")
    spec_web = make_spec(["pacs-web"], label="pacs-web")
    proj = phantom.project_cone(spec_web, PHANTOM)

    # STOW-RS with basic auth
    jid_web = submit(api, spec_web, proj)
    j = wait_delivery(api, jid_web, ("sent", "send_failed"))
    push = (j.get("push") or [{}])[0]
    check("STOW-RS: job succeeded and delivery is sent",
          j["state"] == "succeeded" and j.get("delivery") == "sent", "%s %s %s" % (j["state"], j.get("delivery"), push))
    check("STOW-RS: the push counts every instance sent", push.get("instances_sent") == 24 and
          push.get("instances") == 24 and push.get("state") == "sent" and push.get("kind") == "stow-rs", str(push))
    insts_web = check_orthanc("STOW-RS", o, spec_web, jid_web, api)
    check_download("STOW-RS job", api, jid_web, spec_web, insts_web, tmp)
    st, _, body, doc = api.get("/v1/jobs/" + jid_web)
    check("GET /v1/jobs/{id} returns the patient fields to a reader", st == 200 and
          (doc or {}).get("dicom", {}).get("patient_name") == PATIENT["patient_name"], str((doc or {}).get("dicom")))

    # C-STORE, another patient, a study UID of the client's own
    p2 = dict(PATIENT, patient_id="PID-88421", patient_name="Zweite^Person",
              study_instance_uid=UID_ROOT + ".424242.1")
    spec_dimse = make_spec(["pacs-dimse"], dicom=p2, label="pacs-dimse")
    jid_dimse = submit(api, spec_dimse, proj)
    from recond_client import Client
    states = [data for ev, data in Client(d.url).events(jid_dimse, idle_timeout=120)
              if ev == "state" and isinstance(data, dict)]
    counts = [(s.get("state"), s.get("delivery"), (s.get("push") or [{}])[0].get("instances_sent")) for s in states]
    check("events: after succeeded the stream follows the push (instances_sent) and ends once it is sent",
          counts and counts[-1][1] == "sent" and ("succeeded", "sending", 24) in counts, str(counts))
    j = wait_delivery(api, jid_dimse, ("sent", "send_failed"))
    check("C-STORE: job succeeded and delivery is sent", j.get("delivery") == "sent",
          "%s %s" % (j.get("delivery"), j.get("push")))
    insts_dimse = check_orthanc("C-STORE", o, spec_dimse, jid_dimse, api)
    if insts_dimse:
        check("C-STORE: the client's study UID is used", str(insts_dimse[0].StudyInstanceUID) == p2["study_instance_uid"],
              str(insts_dimse[0].StudyInstanceUID))

    # a PACS that is down, and one that refuses our called AE title
    spec_down = make_spec(["pacs-down", "pacs-wrong-ae"], dicom={"patient_id": "PID-DOWN"}, label="pacs-down")
    jid_down = submit(api, spec_down, proj)
    j = wait_delivery(api, jid_down, ("send_failed",), timeout=120)
    pushes = {p["destination"]: p for p in j.get("push", [])}
    down, wrong = pushes.get("pacs-down", {}), pushes.get("pacs-wrong-ae", {})
    check("a PACS that is down: send_failed after push_max_attempts (2) with the reason",
          j.get("delivery") == "send_failed" and down.get("state") == "send_failed" and down.get("attempts") == 2 and
          "STOW-RS" in down.get("error", ""), str(down))
    check("a PACS that rejects the called AE: send_failed with DCMTK's reason",
          wrong.get("state") == "send_failed" and wrong.get("error"), str(wrong))
    st, _, raw, _ = api.get("/v1/jobs/%s/volume?format=raw" % jid_down)
    check("after send_failed the volume is still downloadable", st == 200 and len(raw) == 4 * 32 * 28 * 24, str(st))
    st, _, body, doc = api.request("POST", "/v1/jobs/%s/push" % jid_down)
    check("POST push answers 202 with the pushes pending again", st == 202 and
          all(p["state"] in ("pending", "sending") and p["attempts"] == 0 for p in (doc or {}).get("push", [])),
          "%d %s" % (st, (doc or {}).get("push")))
    j = wait_delivery(api, jid_down, ("send_failed",), timeout=120)
    check("... and they are tried again (attempts counted anew)",
          all(p["attempts"] == 2 for p in j.get("push", [])), str(j.get("push")))

    # durable across a restart: a push waiting for its retry is sent once the destination is fixed
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["dicom"]["push_retry_s"] = 600
    cfg2["dicom"]["push_max_attempts"] = 5
    with open(cfg_path, "w") as f:
        json.dump(cfg2, f)
    d.stop()
    d.start()
    api = d.api()
    spec_later = make_spec(["pacs-down"], dicom=dict(PATIENT, patient_id="PID-LATER"), label="pacs-later")
    jid_later = submit(api, spec_later, proj)
    j = wait_job(api, jid_later,
                 lambda j: j.get("push") and j["push"][0]["attempts"] >= 1 and j["push"][0]["state"] == "pending")
    check("a failed attempt waits for its retry (pending, next_attempt set)",
          j["push"][0]["state"] == "pending" and j["push"][0].get("next_attempt"), str(j.get("push")))
    d.stop()
    cfg2["destinations"][2]["url"] = o.dicomweb_url  # the operator fixes the address
    cfg2["destinations"][2]["username"] = "recond"
    cfg2["destinations"][2]["password"] = "s3cret-orthanc"
    with open(cfg_path, "w") as f:
        json.dump(cfg2, f)
    d.start()
    api = d.api()
    j = wait_delivery(api, jid_later, ("sent", "send_failed"), timeout=120)
    check("after a restart the waiting push is sent", j.get("delivery") == "sent" and
          j["push"][0]["attempts"] == 2, str(j.get("push")))
    ser, insts = orthanc_series(o, "PID-LATER")
    check("... and Orthanc has it", len(insts) == 24, "%d instances" % len(insts))

    # patient data never in the logs
    d.stop()
    logs = d.read_log()
    for i in range(1, d.starts):
        try:
            with open(os.path.join(d.logdir, "recond-%d.log" % i), encoding="utf-8", errors="replace") as f:
                logs += f.read()
        except OSError:
            pass
    audit_path = os.path.join(d.store, "audit.log")
    audit = open(audit_path, encoding="utf-8", errors="replace").read() if os.path.exists(audit_path) else ""
    leaked = [v for v in (PATIENT["patient_name"], "Testpatient", PATIENT["patient_id"], PATIENT["patient_birth_date"],
                          "Zweite", "PID-88421") if v in logs or v in audit]
    check("the patient's name, id and birth date are in neither the daemon's log nor the audit log "
          "(%d + %d bytes read)" % (len(logs), len(audit)), not leaked and len(logs) > 0 and len(audit) > 0,
          str(leaked))
    o.stop()


if __name__ == "__main__":
    run_main(main)
