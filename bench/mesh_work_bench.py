"""What a unit of mesh work costs, per reader, and what the worst file under the size cap costs: prints
one JSON object.

Every mesh reader counts the elements it processes against ``MAX_MESH_WORK`` (formats/meshes.py); the
cap is chosen so that the costliest element times the cap is ~2 s.  Per format, a legitimate mesh of
~1-2 million work units is generated and read with an unbounded budget: CPU seconds (``process_time``:
what one idle core takes; single-threaded numpy) and wall seconds per million work units.  Then the
worst cases at the cap in force: issue 41's Inventor amplification file (~960 KB: one DEF'd face set of
300,000 ``-1`` indices USE'd 9,000 times, read until the budget refuses it), the other amplification
files of test/fuzz/test_fuzz_structured.py at full size, and the largest legitimate read the cap lets
through per format.  The host's load average is recorded: on a loaded host wall time is several times
CPU time.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/mesh_work_bench.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_bridge.errors import WorkBudgetError  # noqa: E402
from robot_bridge.formats import meshes  # noqa: E402

UNBOUNDED = 10 ** 12


def _grid(n: int):
    """A triangulated n x n grid: (points (n*n, 3), triangles (2 (n-1)^2, 3))."""
    import numpy as np

    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    points = np.column_stack([i.ravel(), j.ravel(), ((i * j) % 7).ravel()]).astype(float) * 0.01
    a = (i[:-1, :-1] * n + j[:-1, :-1]).ravel()
    tris = np.concatenate([np.column_stack([a, a + n, a + 1]), np.column_stack([a + 1, a + n, a + n + 1])])
    return points, tris


def _iv_binary(*words) -> bytes:
    out = [b"#Inventor V2.1 binary  \n"]
    for w in words:
        if isinstance(w, str):
            raw = w.encode()
            out.append(struct.pack(">i", len(raw)) + raw + b"\0" * (-len(raw) % 4))
        elif isinstance(w, float):
            out.append(struct.pack(">f", w))
        else:
            out.append(struct.pack(">i", w))
    return b"".join(out)


def _gltf(nodes: list, roots: list) -> str:
    """A glTF document of one triangle (its buffer inline) placed by ``nodes`` (as test_fuzz_structured's)."""
    import base64

    data = struct.pack("<9f", 0, 0, 0, 1, 0, 0, 0, 1, 0) + struct.pack("<3I", 0, 1, 2)
    return json.dumps({
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": roots}], "nodes": nodes,
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3", "max": [1, 1, 0],
                       "min": [0, 0, 0]},
                      {"bufferView": 1, "componentType": 5125, "count": 3, "type": "SCALAR"}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 36},
                        {"buffer": 0, "byteOffset": 36, "byteLength": 12}],
        "buffers": [{"byteLength": 48, "uri": "data:application/octet-stream;base64,"
                     + base64.b64encode(data).decode()}]})


def legit_files(folder: Path, n: int) -> dict[str, Path]:
    """One mesh per format of the same n x n grid (2 (n-1)^2 triangles)."""
    import trimesh

    points, tris = _grid(n)
    mesh = trimesh.Trimesh(points, tris, process=False)
    out = {}
    for kind, options in (("stl", {}), ("stl_ascii", {"file_type": "stl_ascii"}), ("obj", {}), ("off", {}),
                          ("ply", {"encoding": "ascii"}), ("ply_binary", {"encoding": "binary"}),
                          ("glb", {})):
        path = folder / f"grid_{kind}.{kind.split('_')[0]}"
        data = mesh.export(file_type=options.pop("file_type", kind.split("_")[0]), **options)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        out[kind] = path
    coords = ", ".join(f"{x:g} {y:g} {z:g}" for x, y, z in points.tolist())
    faces = " ".join(f"{a} {b} {c} -1" for a, b, c in tris.tolist())
    out["iv"] = folder / "grid.iv"
    out["iv"].write_text(f"#Inventor V2.1 ascii\nSeparator {{\n Coordinate3 {{ point [ {coords} ] }}\n"
                         f" IndexedFaceSet {{ coordIndex [ {faces} ] }}\n}}\n")
    out["wrl"] = folder / "grid.wrl"
    out["wrl"].write_text(f"#VRML V2.0 utf8\nShape {{ geometry IndexedFaceSet {{ coord Coordinate {{ point "
                          f"[ {coords} ] }} coordIndex [ {faces} ] }} }}\n")
    flat = [int(v) for row in tris.tolist() for v in (*row, -1)]
    out["iv_binary"] = folder / "grid_binary.iv"
    out["iv_binary"].write_bytes(_iv_binary("Separator", 0, 0, 2, "Coordinate3", 0, 1, "point", len(points),
                                            *map(float, points.ravel().tolist()), 0,
                                            "IndexedFaceSet", 0, 1, "coordIndex", len(flat), *flat, 0))
    p = " ".join(map(str, tris.ravel().tolist()))
    out["dae"] = folder / "grid.dae"
    out["dae"].write_text(
        '<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">'
        '<library_geometries><geometry id="g"><mesh><source id="p"><float_array id="pa" '
        f'count="{points.size}">{" ".join(map(str, points.ravel().tolist()))}</float_array><technique_common>'
        f'<accessor source="#pa" count="{len(points)}" stride="3"><param name="X" type="float"/>'
        '<param name="Y" type="float"/><param name="Z" type="float"/></accessor></technique_common></source>'
        '<vertices id="v"><input semantic="POSITION" source="#p"/></vertices>'
        f'<triangles count="{len(tris)}"><input semantic="VERTEX" source="#v" offset="0"/><p>{p}</p>'
        '</triangles></mesh></geometry></library_geometries><library_visual_scenes><visual_scene id="s">'
        '<node><instance_geometry url="#g"/></node></visual_scene></library_visual_scenes><scene>'
        '<instance_visual_scene url="#s"/></scene></COLLADA>')
    return out


def worst_files(folder: Path) -> dict[str, Path]:
    """Files whose cost is not their size: amplification (each under 1 MB) and many small elements."""
    out = {"issue41_iv": folder / "amplified.iv"}
    out["issue41_iv"].write_text("#Inventor V2.1 ascii\nSeparator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, "
                                 "0 1 0 ] }\n  DEF F IndexedFaceSet { coordIndex [ " + "-1 " * 300_000
                                 + "] }\n"
                                 + "  USE F\n" * 9_000 + "}\n")
    out["triangles_iv"] = folder / "triangles.iv"     # real triangles USE'd: corners, fans, transforms
    out["triangles_iv"].write_text("#Inventor V2.1 ascii\nSeparator {\n  Coordinate3 { point [ 0 0 0, 1 0 0, "
                                   "0 1 0 ] }\n  DEF F IndexedFaceSet { coordIndex [ " + "0 1 2 -1 " * 50_000
                                   + "] }\n" + "  USE F\n" * 9_000 + "}\n")
    out["binary_iv"] = folder / "amplified_binary.iv"
    out["binary_iv"].write_bytes(_iv_binary("Separator", 0, 0, 2 + 9_000, "Coordinate3", 0, 1, "point", 3,
                                            *map(float, [0, 0, 0, 1, 0, 0, 0, 1, 0]), 0, "DEF", "F",
                                            "IndexedFaceSet", 0, 1, "coordIndex", 100_000, *([-1] * 100_000),
                                            0, *(["USE", "F"] * 9_000)))
    # a primitive USE'd: made once, its triangles at each use
    out["cone_uses_iv"] = folder / "cone_uses.iv"
    out["cone_uses_iv"].write_text("#Inventor V2.1 ascii\nSeparator {\n DEF S Cone { bottomRadius 1 "
                                   "height 2 }\n" + " USE S\n" * 9_990 + "}\n")
    # many small nodes: each is parsed (Python objects) before the visit budget could stop the walk
    out["field_nodes_iv"] = folder / "field_nodes.iv"
    out["field_nodes_iv"].write_text("#Inventor V2.1 ascii\n"
                                     + "Translation { translation 1 2 3 } " * 200_000)
    node = _iv_binary("Info", 0, 0)[len(b"#Inventor V2.1 binary  \n"):]
    out["binary_nodes_iv"] = folder / "binary_nodes.iv"
    out["binary_nodes_iv"].write_bytes(b"#Inventor V2.1 binary  \n" + node * 250_000)
    # the most elements a mesh-only COLLADA file may hold under the cap
    out["elements_dae"] = folder / "elements.dae"
    elements = meshes.MAX_MESH_WORK // meshes.XML_ELEMENT_WORK - 1_000
    out["elements_dae"].write_text('<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/'
                                   'COLLADASchema" version="1.4.1">' + "<a/>" * elements + "</COLLADA>")
    # glTF nodes (trimesh's scene graph; a chain grows with the square of its depth) up to the cap
    n = meshes.MAX_MESH_WORK // meshes.GLTF_NODE_WORK - 500
    out["gltf_nodes"] = folder / "nodes.gltf"
    out["gltf_nodes"].write_text(_gltf([{"mesh": 0}] * n, list(range(n))))
    out["gltf_chain"] = folder / "chain.gltf"
    out["gltf_chain"].write_text(_gltf([{"children": [i + 1]} for i in range(n - 1)] + [{"mesh": 0}], [0]))
    levels = "".join(f'<node id="a{i}">' + f'<instance_node url="#a{i + 1}"/>' * 10 + "</node>"
                     for i in range(6)) + '<node id="a6"><instance_geometry url="#g"/></node>'
    out["instance_node_dae"] = folder / "nodes.dae"
    out["instance_node_dae"].write_text(
        '<?xml version="1.0"?><COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">'
        '<library_geometries><geometry id="g"><mesh><source id="p"><float_array id="pa" count="9">'
        '0 0 0 1 0 0 0 1 0</float_array><technique_common><accessor source="#pa" count="3" stride="3">'
        '<param name="X" type="float"/><param name="Y" type="float"/><param name="Z" type="float"/>'
        '</accessor></technique_common></source><vertices id="v"><input semantic="POSITION" source="#p"/>'
        '</vertices><triangles count="1"><input semantic="VERTEX" source="#v" offset="0"/><p>0 1 2</p>'
        '</triangles>'
        f'</mesh></geometry></library_geometries><library_nodes>{levels}</library_nodes>'
        '<library_visual_scenes><visual_scene id="s"><node><instance_node url="#a0"/></node></visual_scene>'
        '</library_visual_scenes><scene><instance_visual_scene url="#s"/></scene></COLLADA>')
    return out


def read(path: Path, work: int) -> dict:
    budget = meshes.MeshBudget(work=work)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        triangles = len(meshes.load_triangles(path, budget=budget)[1])
        refused = None
    except WorkBudgetError as err:
        triangles, refused = 0, err.budget
    return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall, "work": budget.work,
            "triangles": triangles, "refused_by": refused, "bytes": path.stat().st_size}


def best(path: Path, work: int, rounds: int) -> dict:
    runs = [read(path, work) for _ in range(rounds)]
    return min(runs, key=lambda r: r["cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="reads per file; the least CPU time is kept")
    parser.add_argument("--grid", type=int, default=300, help="grid points per side of the legitimate meshes")
    args = parser.parse_args()
    load_before = os.getloadavg()
    out: dict = {"cores": os.cpu_count(), "MAX_MESH_WORK": meshes.MAX_MESH_WORK, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        meshes.load_triangles(legit_files(folder, 10)["stl"])                 # imports, first calls
        per_format = {}
        for kind, path in legit_files(folder, args.grid).items():
            r = best(path, UNBOUNDED, args.rounds)
            r["cpu_s_per_million_work"] = r["cpu_s"] / r["work"] * 1e6
            r["wall_s_per_million_work"] = r["wall_s"] / r["work"] * 1e6
            # the largest file of this kind the cap lets through: its cost at the cap
            r["cpu_s_at_cap"] = r["cpu_s_per_million_work"] * meshes.MAX_MESH_WORK / 1e6
            per_format[kind] = r
        out["per_format"] = per_format
        out["worst_cases"] = {kind: best(path, meshes.MAX_MESH_WORK, args.rounds)
                              for kind, path in worst_files(folder).items()}
    worst = max([(r["cpu_s"], k) for k, r in out["worst_cases"].items()]
                + [(r["cpu_s_at_cap"], k) for k, r in per_format.items()])
    out["worst_cpu_s"], out["worst_file"] = worst
    out["load_average"] = {"before": load_before, "after": os.getloadavg()}
    json.dump(out, sys.stdout, indent=1, default=float)
    print()


if __name__ == "__main__":
    main()
