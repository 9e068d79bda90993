"""Hostile robot descriptions, written into a temporary folder by the tests themselves.

Layout of every case: ``<tmp>/desc/`` is the description's folder (the allowed root) and
``<tmp>/outside/`` holds files a hostile description points at.  Each ``outside`` file is a
*valid* include/mesh, so a reader that followed the reference would load instead of refusing.

Run ``python test/hostile/cases.py`` to print the wall time of ``robot-bridge check`` per case
(JSON), the figure the issue asks for (< 1 s each).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from robot_bridge import errors as E

HERE = Path(__file__).resolve().parent
COLLADA_BASE = HERE.parent / "fixtures" / "collada" / "formula.dae"

# ----------------------------------------------------------------------------------- valid bases
OPENRAVE = """<Robot name="r">
 <KinBody name="r">
  <Body name="base" type="dynamic"><Geom type="box"><Extents>0.1 0.1 0.1</Extents></Geom></Body>
  <Body name="l1" type="dynamic"><offsetfrom>base</offsetfrom><Translation>0 0 0.2</Translation>
   <Geom type="box"><Extents>0.05 0.05 0.1</Extents></Geom></Body>
  <Joint name="j1" type="hinge"J1ATTR><Body>base</Body><Body>l1</Body><offsetfrom>l1</offsetfrom>
   <axis>0 0 1</axis><limitsdeg>-90 90</limitsdeg></Joint>
  <Body name="l2" type="dynamic"><offsetfrom>l1</offsetfrom><Translation>0 0 0.2</Translation></Body>
  <Joint name="j2" type="hinge"J2ATTR><Body>l1</Body><Body>l2</Body><offsetfrom>l2</offsetfrom>
   <axis>0 1 0</axis><limitsdeg>-90 90</limitsdeg>J2EXTRA</Joint>
  BODYEXTRA
 </KinBody>
</Robot>
"""

URDF = """<?xml version="1.0"?>
<robot name="r">
 <link name="base"><visual><geometry>GEOM</geometry></visual></link>
 <link name="l1"/>
 <link name="l2"/>
 <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
  <origin xyz="ORIGIN" rpy="0 0 0"/><axis xyz="AXIS"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  J1EXTRA</joint>
 <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
  <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
  J2EXTRA</joint>
</robot>
"""

# What an escaping include points at: a valid addition to OPENRAVE (loads when allowed).
INCLUDED = """<KinBody name="inc">
 <Body name="extra" type="dynamic"><offsetfrom>l2</offsetfrom></Body>
 <Joint name="jx" type="hinge" enable="false"><Body>l2</Body><Body>extra</Body>
  <limitsdeg>0 0</limitsdeg></Joint>
</KinBody>
"""

SRDF = """<?xml version="1.0"?>
<robot name="r"><group name="arm"><chain base_link="base" tip_link="l2"/></group>
 <handle name="h" clearance="0.05"><position>POSITION</position><link name="l2"/>DIRECTION</handle>
</robot>
"""


def srdf(position: str = "0 0 0.1 1 0 0 0", direction: str = "") -> str:
    return SRDF.replace("POSITION", position).replace("DIRECTION", direction)


def load_any(path: Path, **options):
    """``formats.load``; an .srdf is read against the URDF base it describes (SRDF has no kinematics)."""
    from robot_bridge.formats import load

    if path.suffix != ".srdf":
        return load(path, **options)
    from robot_bridge.formats.srdf import read_srdf
    from robot_bridge.formats.urdf import read_string

    return read_srdf(path, read_string(urdf()))

ROOT_TAG = {"openrave": "Robot", "collada": "COLLADA", "urdf": "robot", "srdf": "robot"}
SUFFIX = {"openrave": ".robot.xml", "collada": ".dae", "urdf": ".urdf", "srdf": ".srdf"}
FORMATS = tuple(ROOT_TAG)

STL = (b"solid t\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n"
       b"endloop\nendfacet\nendsolid t\n")


def openrave(**subs) -> str:
    text = OPENRAVE
    for key in ("J1ATTR", "J2ATTR", "J2EXTRA", "BODYEXTRA"):
        text = text.replace(key, subs.get(key, ""))
    return text


def urdf(**subs) -> str:
    defaults = {"GEOM": '<box size="1 1 1"/>', "ORIGIN": "0 0 0.2", "AXIS": "0 0 1", "J1EXTRA": "",
                "J2EXTRA": ""}
    text = URDF
    for key, value in {**defaults, **subs}.items():
        text = text.replace(key, value)
    return text


def collada(*replacements: tuple[str, str]) -> str:
    text = COLLADA_BASE.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def valid(fmt: str) -> str:
    return {"openrave": openrave(), "collada": collada(), "urdf": urdf(), "srdf": srdf()}[fmt]


# ----------------------------------------------------------------------------------- cases
UNSAFE = (E.UnsafeInputError,)
@dataclass
class Built:
    path: Path                    # the description to load
    root: Path                    # its allowed root (the desc folder)
    outside: Path                 # folder the case must never read from


@dataclass
class Case:
    id: str
    fmt: str
    write: Callable[[Path, Path], Path]     # (desc dir, outside dir) -> description path
    expect: tuple[type, ...] | None      # None: loads, warns about the reference, reads nothing outside
    env: Callable[[Path], dict] | None = None       # (tmp) -> environment variables for the load

    def build(self, tmp: Path) -> Built:
        desc, outside = tmp / "desc", tmp / "outside"
        desc.mkdir(parents=True, exist_ok=True)
        outside.mkdir(parents=True, exist_ok=True)
        (outside / "secret.txt").write_text("secret\n")
        (outside / "inc.robot.xml").write_text(INCLUDED)
        (outside / "mesh.stl").write_bytes(STL)
        return Built(self.write(desc, outside), desc, outside)


def _file(name: str, content: str | bytes) -> Callable[[Path, Path], Path]:
    def write(desc: Path, outside: Path) -> Path:
        p = desc / name
        data = content(outside) if callable(content) else content
        if isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)
        return p
    return write


def _with_prolog(fmt: str, prolog: str, inner: str = "") -> str:
    """A valid document of ``fmt`` with ``prolog`` before the root and ``inner`` in the root tag."""
    text = valid(fmt)
    if text.startswith("<?xml"):
        text = text.split("?>", 1)[1]
    tag = ROOT_TAG[fmt]
    head, rest = text.split(f"<{tag}", 1)
    return f'<?xml version="1.0"?>\n{prolog}\n{head}<{tag}{inner}{rest}'


def _with_entity(fmt: str, prolog: str, entity: str) -> str:
    close = f"</{ROOT_TAG[fmt]}>"
    return _with_prolog(fmt, prolog).replace(close, f"<note>&{entity};</note>{close}")


def xml_level_cases(fmt: str) -> list[Case]:
    tag, sfx = ROOT_TAG[fmt], SUFFIX[fmt]
    laughs = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))

    def xxe_file(outside):
        return _with_entity(fmt, f'<!DOCTYPE {tag} [<!ENTITY x SYSTEM "file://{outside}/secret.txt">]>', "x")

    def ext_dtd(outside):
        (outside / "evil.dtd").write_text('<!ENTITY x "pwned">')
        return _with_prolog(fmt, f'<!DOCTYPE {tag} SYSTEM "file://{outside}/evil.dtd">')

    def xinclude(outside):
        body = _with_prolog(fmt, "", ' xmlns:xi="http://www.w3.org/2001/XInclude"')
        close = f"</{tag}>"
        return body.replace(close, f'<xi:include href="file://{outside}/secret.txt" parse="text"/>{close}')

    def deep(_outside):
        return _with_prolog(fmt, "").replace(f"</{tag}>", "<a>" * 50000 + "</a>" * 50000 + f"</{tag}>")

    def non_utf8(_outside):
        return _with_prolog(fmt, "", ' name="caf\xe9"').encode("latin-1")

    def garbage(_outside):
        import random

        rng = random.Random(10)
        return bytes(rng.getrandbits(8) for _ in range(64 * 1024))

    def huge(desc_name):
        def write(desc: Path, _outside: Path) -> Path:
            p = desc / desc_name
            head = _with_prolog(fmt, "").encode()
            with open(p, "wb") as f:
                f.write(head[:-2] + b"<!--")
                f.truncate(100 * 1024 * 1024)          # sparse: 100 MB on paper, no disk churn
            return p
        return write

    unsafe, syntax = UNSAFE, (E.XMLSyntaxError,)
    return [
        Case(f"{fmt}-xxe-file", fmt, _file("r" + sfx, xxe_file), unsafe),
        Case(f"{fmt}-xxe-network", fmt, _file("r" + sfx, lambda o: _with_entity(
            fmt, f'<!DOCTYPE {tag} [<!ENTITY x SYSTEM "http://127.0.0.1:9/x">]>', "x")), unsafe),
        Case(f"{fmt}-billion-laughs", fmt, _file("r" + sfx, lambda o: _with_entity(
            fmt, f'<!DOCTYPE {tag} [<!ENTITY l0 "ha">{laughs}]>', "l9")), unsafe),
        Case(f"{fmt}-external-dtd", fmt, _file("r" + sfx, ext_dtd), unsafe),
        Case(f"{fmt}-xinclude", fmt, _file("r" + sfx, xinclude), unsafe),
        Case(f"{fmt}-deep-nesting", fmt, _file("r" + sfx, deep), syntax + unsafe),
        Case(f"{fmt}-100MB", fmt, huge("r" + sfx), unsafe),
        Case(f"{fmt}-non-utf8", fmt, _file("r" + sfx, non_utf8), syntax),
        Case(f"{fmt}-binary-garbage", fmt, _file("r" + sfx, garbage),
             syntax + (E.SchemaError, E.UnsupportedFormatError)),
    ]


def openrave_cases() -> list[Case]:
    def include(ref):
        return _file("r.robot.xml", lambda o: openrave(
            BODYEXTRA=f'<KinBody file="{ref(o)}"/>'))

    def cycle(desc: Path, _outside: Path) -> Path:
        (desc / "a.kinbody.xml").write_text('<KinBody name="a"><KinBody file="b.kinbody.xml"/></KinBody>')
        (desc / "b.kinbody.xml").write_text('<KinBody name="b"><KinBody file="a.kinbody.xml"/></KinBody>')
        p = desc / "r.robot.xml"
        p.write_text(openrave(BODYEXTRA='<KinBody file="a.kinbody.xml"/>'))
        return p

    def symlink(desc: Path, outside: Path) -> Path:
        (desc / "link.robot.xml").symlink_to(outside / "inc.robot.xml")
        return include(lambda o: "link.robot.xml")(desc, outside)

    def mesh(ref):
        return _file("r.robot.xml", lambda o: openrave(BODYEXTRA=(
            f'<Body name="m" type="dynamic"><Geom type="trimesh"><Data>{ref(o)}</Data></Geom></Body>')))

    schema = (E.SchemaError,)
    return [
        Case("openrave-file-escape-relative", "openrave", include(lambda o: "../outside/inc.robot.xml"),
             UNSAFE),
        Case("openrave-file-escape-absolute", "openrave", include(lambda o: f"{o}/inc.robot.xml"),
             UNSAFE),
        Case("openrave-file-escape-symlink", "openrave", symlink, UNSAFE),
        Case("openrave-mesh-escape", "openrave", mesh(lambda o: "../outside/mesh.stl"), UNSAFE),
        Case("openrave-include-cycle", "openrave", cycle, (E.IncludeCycleError,)),
        Case("openrave-1e400", "openrave", _file("r.robot.xml", openrave(
            J2EXTRA="<anchor>1e400 0 0</anchor>")), schema),
        Case("openrave-nan", "openrave", _file("r.robot.xml", openrave().replace(
            "<Translation>0 0 0.2</Translation>", "<Translation>NaN 0 0.2</Translation>", 1)), schema),
        Case("openrave-zero-axis", "openrave", _file("r.robot.xml", openrave().replace(
            "<axis>0 1 0</axis>", "<axis>0 0 0</axis>")), schema + (E.KinematicsError,)),
        Case("openrave-non-orthonormal", "openrave", _file("r.robot.xml", openrave().replace(
            "<Translation>0 0 0.2</Translation>",
            "<Translation>0 0 0.2</Translation><rotationmat>2 0 0 0 1 0 0 0 1</rotationmat>", 1)), schema),
        Case("openrave-mimic-unknown", "openrave", _file("r.robot.xml", openrave(
            J2ATTR=' mimic_pos="nosuchjoint*2"')), (E.ExpressionError, E.UnknownReferenceError)),
        Case("openrave-mimic-cycle", "openrave", _file("r.robot.xml", openrave(
            J1ATTR=' mimic_pos="j2"', J2ATTR=' mimic_pos="j1"')), (E.KinematicsError,)),
    ]


def urdf_cases() -> list[Case]:
    def mesh(ref):
        return _file("r.urdf", lambda o: urdf(GEOM=f'<mesh filename="{ref(o)}"/>'))

    schema = (E.SchemaError,)
    mimic_j1 = '<mimic joint="j2"/>'
    return [
        Case("urdf-mesh-escape-relative", "urdf", mesh(lambda o: "../outside/mesh.stl"), UNSAFE),
        Case("urdf-mesh-escape-file-uri", "urdf", mesh(lambda o: f"file://{o}/mesh.stl"), UNSAFE),
        # a folder without package.xml on ROS_PACKAGE_PATH is no package: the mesh is kept unresolved with a
        # warning (issue 31), nothing outside is read
        Case("urdf-mesh-escape-package", "urdf", mesh(lambda o: "package://outside/mesh.stl"), None,
             env=lambda tmp: {"ROS_PACKAGE_PATH": str(tmp)}),
        Case("urdf-1e400", "urdf", _file("r.urdf", urdf(ORIGIN="1e400 0 0")), schema),
        Case("urdf-nan", "urdf", _file("r.urdf", urdf(ORIGIN="nan 0 0")), schema),
        Case("urdf-zero-axis", "urdf", _file("r.urdf", urdf(AXIS="0 0 0")), schema + (E.KinematicsError,)),
        Case("urdf-mimic-unknown", "urdf", _file("r.urdf", urdf(J2EXTRA='<mimic joint="nosuchjoint"/>')),
             (E.UnknownReferenceError, E.ExpressionError)),
        Case("urdf-mimic-cycle", "urdf", _file("r.urdf", urdf(
            J1EXTRA=mimic_j1, J2EXTRA='<mimic joint="j1"/>')),
             (E.KinematicsError,)),
    ]


def _zae(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def collada_cases() -> list[Case]:
    csym = '<m:csymbol encoding="COLLADA">kmodel/j1</m:csymbol>'
    schema = (E.SchemaError,)

    def bomb(_o):
        big = b"<!--" + b" " * (40 * 1024 * 1024) + b"-->"
        return _zae({"robot.dae": collada().encode(), "zz.dae": big,
                     "manifest.xml": b"<dae_root>./zz.dae</dae_root>"})

    def nested_bomb(_o):
        inner = _zae({f"{i}.dae": b"\0" * (8 * 1024 * 1024) for i in range(3)})
        return _zae({"robot.dae": inner})

    def escape(_o):
        return collada(('<instance_geometry url="#box_geom"/>',
                        f'<instance_geometry url="file://{_o}/other.dae#box_geom"/>'))

    formula_j2 = ('<formula sid="j3_formula">',
                  '<formula sid="j2_formula"><target><param>kmodel/j2</param></target><technique_common>'
                  '<math xmlns="http://www.w3.org/1998/Math/MathML"><csymbol encoding="COLLADA">kmodel/j3'
                  '</csymbol></math></technique_common></formula><formula sid="j3_formula">')
    return [
        Case("collada-zip-bomb", "collada", _file("r.zae", bomb), UNSAFE),
        Case("collada-zip-nested", "collada", _file("r.zae", nested_bomb),
             (E.UnsafeInputError, E.XMLSyntaxError)),
        Case("collada-external-url", "collada", _file("r.dae", escape), None),
        Case("collada-1e400", "collada", _file("r.dae", collada(
            ("<translate>200 0 0</translate>\n                <link", "<translate>1e400 0 0</translate>\n"
             "                <link"))), schema),
        Case("collada-nan", "collada", _file("r.dae", collada(
            ("<translate>200 0 0</translate>\n                <link", "<translate>NaN 0 0</translate>\n"
             "                <link"))), schema),
        Case("collada-zero-axis", "collada", _file("r.dae", collada(
            ("<axis>2 0 0</axis>", "<axis>0 0 0</axis>"))),
             schema + (E.KinematicsError,)),
        Case("collada-non-orthonormal", "collada", _file("r.dae", collada(
            ("<translate>50 0 0</translate>\n                    <link",
             "<matrix>2 0 0 50 0 1 0 0 0 0 1 0 0 0 0 1</matrix>\n                    <link"))), schema),
        Case("collada-mimic-unknown", "collada", _file("r.dae", collada(
            (csym, csym.replace("kmodel/j1", "kmodel/nosuchjoint")))),
             (E.ExpressionError, E.UnknownReferenceError)),
        Case("collada-mimic-cycle", "collada", _file("r.dae", collada(formula_j2)), (E.KinematicsError,)),
    ]


def srdf_cases() -> list[Case]:
    schema = (E.SchemaError,)
    return [
        Case("srdf-1e400", "srdf", _file("r.srdf", srdf("1e400 0 0 1 0 0 0")), schema),
        Case("srdf-nan", "srdf", _file("r.srdf", srdf("0 0 0 nan 0 0 0")), schema),
        Case("srdf-zero-quaternion", "srdf", _file("r.srdf", srdf("0 0 0 0 0 0 0")), schema),
        Case("srdf-zero-axis", "srdf", _file("r.srdf", srdf(
            direction="<approaching_direction>0 0 0</approaching_direction>")), schema),
    ]


def all_cases() -> list[Case]:
    out: list[Case] = []
    for fmt in FORMATS:
        out += xml_level_cases(fmt)
    return out + openrave_cases() + urdf_cases() + collada_cases() + srdf_cases()


if __name__ == "__main__":   # time `robot-bridge check` per case
    import contextlib
    import json
    import tempfile
    import time

    from robot_bridge.cli.main import main

    import os

    times = {}
    with contextlib.redirect_stdout(io.StringIO()):
        main(["check", str(HERE.parents[1] / "robot_bridge" / "data" / "lwa3_gripper.robot.xml")])  # warm-up
    for case in all_cases():
        with tempfile.TemporaryDirectory() as tmp:
            built = case.build(Path(tmp))
            os.environ.update(case.env(Path(tmp)) if case.env else {})
            start = time.perf_counter()
            if case.fmt == "srdf":     # `check` has no SRDF-with-model mode: time the reader call
                try:
                    load_any(built.path)
                    code, reason = 0, ""
                except E.DescriptionError as exc:
                    code, reason = 2, str(exc)
            else:
                quiet = contextlib.redirect_stdout(io.StringIO())
                with contextlib.redirect_stderr(io.StringIO()) as err, quiet:
                    code = main(["check", str(built.path)])
                reason = err.getvalue().strip()
            seconds = round(time.perf_counter() - start, 4)
            times[case.id] = {"exit": code, "seconds": seconds, "reason": reason,
                              "as_expected": code == (0 if case.expect is None else 2)}
            for key in (case.env(Path(tmp)) if case.env else {}):
                del os.environ[key]
    worst = max(times.values(), key=lambda t: t["seconds"])
    print(json.dumps({"cases": times, "max_seconds": worst["seconds"],
                      "all_as_expected": all(t["as_expected"] for t in times.values())}, indent=1))
