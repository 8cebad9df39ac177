"""Question 3 — 4D communication accounting. docs/spec.md, question 3."""
from __future__ import annotations

from shardlab.autograder.core.casegen import model_shapes

from shardlab.autograder.core.parts import EXACT_INT, REAL, Call, Case, Compare, Part, function_part, written_part
from shardlab.autograder.kit.checks.comm4d import MESH_VOLUMES
from shardlab.autograder.questions import Question
from shardlab.autograder.questions.comm4d.figures import FIGURES
from shardlab.reference import comm4d as ref
from shardlab.reference.derivation import n, sci
from shardlab.reference.specs import HARDWARE

M = "comm4d"
_ICI = [h for h in HARDWARE.values() if h.ici_bytes_per_second > 0]
# the chip of the cases that spread one axis over 2 mesh axes: a 3D torus holds them and the other axis (a
# course's own chip may have only 2 axes)
_V5P = HARDWARE["TPU v5p"]


# ---- case generators: (args, public, note) ---------------------------------

def _mesh(rng, spread: str = ""):
    """A random mesh the chip can hold: power-of-two X and Y (an axis of one chip included: it costs
    nothing, docs/spec.md, question 3) on an ICI chip, over M_X + M_Y mesh axes no more than its torus has.
    spread "x" (or "y"): that axis, of 4 chips or more, over 2 of a v5p's 3 axes and the other over 1, so
    that the random cases always hold a collective over more than one mesh axis (a 2D torus has no room)."""
    hw = _V5P if spread else rng.choice(_ICI)
    m_x = {"x": 2, "y": 1}.get(spread) or rng.randint(1, hw.torus_axes - 1)
    m_y = {"x": 1, "y": 2}.get(spread) or rng.randint(1, hw.torus_axes - m_x)
    x, y = 2 ** rng.randint(2 if spread == "x" else 0, 7), 2 ** rng.randint(2 if spread == "y" else 0, 6)
    return dict(x=x, y=y, m_x=m_x, m_y=m_y), hw.flops_per_second, hw.ici_bytes_per_second


def _course(cfg):
    mesh = cfg.comm4d
    return cfg.model, mesh, mesh.device.flops_per_second, mesh.device.ici_bytes_per_second


# a public example mesh and model: the course's give the handout's answers, so their cases are hidden
EXAMPLE = dict(d_model=8192, d_ff=32768, x=4, y=16, m_x=1, m_y=1)


def _flops_args(cfg, rng):
    m = cfg.model
    # the course model's FLOPs give the handout's forward times (a unit's is this over 2L): hidden
    yield (dict(tokens=cfg.memory.tokens_per_device, d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks),
           False, "the course model")
    yield dict(tokens=5, d_model=8, d_ff=24, num_blocks=3), True, "a tiny model"
    yield dict(tokens=0, d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks), False, "edge case: no tokens"
    for d, f, layers in model_shapes(rng, 5):
        yield dict(tokens=rng.randint(1, 2**22), d_model=d, d_ff=f, num_blocks=layers), False, ""


def _math_args(cfg, rng):
    m, mesh, c, _ = _course(cfg)
    yield (dict(tokens=16 * 4096, d_model=m.d_model, d_ff=m.d_ff, n_devices=mesh.n, flops_per_second=c),
           False, f"the course model on the course mesh (N = {mesh.n})")
    yield (dict(tokens=16 * 4096, d_model=EXAMPLE["d_model"], d_ff=EXAMPLE["d_ff"], n_devices=64,
                flops_per_second=c), True, "")
    yield dict(tokens=1, d_model=m.d_model, d_ff=m.d_ff, n_devices=1, flops_per_second=c), False, "edge case: N = 1"
    for d, f, _ in model_shapes(rng, 5):
        mesh_args, c, _ = _mesh(rng)
        yield (dict(tokens=rng.randint(1, 2**22), d_model=d, d_ff=f,
                    n_devices=mesh_args["x"] * mesh_args["y"], flops_per_second=c), False, "")


def _fsdp_args(cfg, rng):
    m, mesh, _, w = _course(cfg)
    yield dict(d_model=m.d_model, d_ff=m.d_ff, y=mesh.y, w_ici=w, m_x=mesh.m_x), False, "the course mesh"
    yield dict(d_model=EXAMPLE["d_model"], d_ff=EXAMPLE["d_ff"], y=EXAMPLE["y"], w_ici=w, m_x=1), True, ""
    # public, so that the kit catches a time without the M factor before the grader does
    yield (dict(d_model=EXAMPLE["d_model"], d_ff=EXAMPLE["d_ff"], y=EXAMPLE["y"], w_ici=_V5P.ici_bytes_per_second,
                m_x=2), True, "X collectives over 2 mesh axes")
    yield dict(d_model=m.d_model, d_ff=m.d_ff, y=1, w_ici=w, m_x=1), False, "edge case: Y = 1, one mesh axis"
    for i, (d, f, _) in enumerate(model_shapes(rng, 5)):
        mesh_args, _, w = _mesh(rng, "x" if i == 0 else "")
        yield dict(d_model=d, d_ff=f, y=mesh_args["y"], w_ici=w, m_x=mesh_args["m_x"]), False, ""


def _tp_args(cfg, rng):
    m, mesh, _, w = _course(cfg)
    yield dict(tokens=16 * 4096, d_model=m.d_model, x=mesh.x, w_ici=w, m_y=mesh.m_y), False, "the course mesh"
    yield dict(tokens=16 * 4096, d_model=EXAMPLE["d_model"], x=EXAMPLE["x"], w_ici=w, m_y=1), True, ""
    yield (dict(tokens=16 * 4096, d_model=EXAMPLE["d_model"], x=EXAMPLE["x"], w_ici=_V5P.ici_bytes_per_second,
                m_y=2), True, "Y collectives over 2 mesh axes")
    for i, (d, _, _) in enumerate(model_shapes(rng, 5)):
        mesh_args, _, w = _mesh(rng, "y" if i == 0 else "")
        yield (dict(tokens=rng.randint(1, 2**22), d_model=d, x=mesh_args["x"], w_ici=w,
                    m_y=mesh_args["m_y"]), False, "")


def _min_batch_args(cfg, rng):
    m, mesh, c, w = _course(cfg)
    course = dict(d_model=m.d_model, d_ff=m.d_ff, x=mesh.x, y=mesh.y, flops_per_second=c, w_ici=w,
                  m_x=mesh.m_x, m_y=mesh.m_y)
    yield course, False, "the course mesh, default convention (overlapped)"
    yield {**course, "overlap": False}, False, "the course mesh, comms summed"
    example = dict(d_model=EXAMPLE["d_model"], d_ff=EXAMPLE["d_ff"], x=EXAMPLE["x"], y=EXAMPLE["y"],
                   flops_per_second=c, w_ici=w, m_x=EXAMPLE["m_x"], m_y=EXAMPLE["m_y"])   # signature order
    yield example, True, ""
    yield {**example, "overlap": False}, True, ""
    # a second example that is compute bound in both conventions (F·W·M_Y = 1.5e15 > Y·C = 3.9e14), on
    # another chip (a v5e: a 2D torus, so M_X + M_Y = 2): without it every public answer is None and B/N
    # or B/X would pass the kit
    bound = dict(d_model=4096, d_ff=16384, x=8, y=2, flops_per_second=1.97e14, w_ici=9e10, m_x=1, m_y=1)
    yield bound, True, ""
    yield {**bound, "overlap": False}, True, ""
    yield from _one_chip_axes(course)
    # Y large enough that Y·C > F·W·M_Y: TP comms grow with B as fast as the math
    y_never = 2 * int(m.d_ff * w * mesh.m_y / c) + 2
    # the course mesh but Y: hidden (the public example above never hides its TP comms either)
    # (its label names no Y: a fixture's expect.toml can then declare the group on every course)
    yield {**course, "y": y_never}, False, "edge case: a Y so large the TP comms never hide"
    if mesh.device.torus_axes >= 3:     # M_X = 1 and M_Y = 2 fit a 3D torus only
        yield {**course, "m_x": 1, "m_y": 2, "overlap": False}, False, "Y collectives over 2 mesh axes"
    # F·W·M_Y = Y·C exactly (1024 · 1e11 = 4 · 2.56e13): overlapped just hides, summed never
    tie = dict(d_model=128, d_ff=1024, x=8, y=4, flops_per_second=2.56e13, w_ici=1e11, m_x=1, m_y=1)
    yield tie, False, "edge case: math and TP comms grow equally"
    yield {**tie, "overlap": False}, False, "edge case: math and TP comms grow equally, summed"
    # the same boundary shown ("at least as long"), with M_Y = 2 on a v5p (a 3D torus holds M_X + M_Y = 3):
    # F·W·M_Y = 11500 · 1.8e11 · 2 = 9 · 4.6e14 = Y·C, equal in floating point too
    shown = dict(d_model=256, d_ff=11500, x=3, y=9, flops_per_second=4.6e14, w_ici=1.8e11, m_x=1, m_y=2)
    yield shown, True, "edge case: math and TP comms grow equally"
    yield {**shown, "overlap": False}, True, "edge case: math and TP comms grow equally, summed"
    for i, (d, f, _) in enumerate(model_shapes(rng, 8)):
        mesh_args, c, w = _mesh(rng, {0: "x", 1: "y"}.get(i, ""))
        yield (dict(d_model=d, d_ff=f, **{k: mesh_args[k] for k in ("x", "y")}, flops_per_second=c,
                    w_ici=w, m_x=mesh_args["m_x"], m_y=mesh_args["m_y"], overlap=i % 2 == 0), False, "")


def _one_chip_axes(course):
    """Meshes with an axis of one chip, whose collectives cost nothing (docs/spec.md, question 3): public on
    a v5p's numbers (X = 1: F·W·M_Y = 32,768 · 1.8e11 = 5.9e15 >= Y·C = 8 · 4.6e14 = 3.68e15, so the TP comms
    hide and every batch is compute bound, B = 0; Y = 1, summed: B = X·C / (W·M_X), as overlapped), hidden on
    the course's mesh. Summed where the convention matters: with one term at 0 the two agree."""
    v5p = dict(d_model=EXAMPLE["d_model"], d_ff=EXAMPLE["d_ff"], flops_per_second=_V5P.flops_per_second,
               w_ici=_V5P.ici_bytes_per_second)
    order = ("d_model", "d_ff", "x", "y", "flops_per_second", "w_ici", "m_x", "m_y", "overlap")
    for args, public, note in (
            ({**v5p, "x": 1, "y": 8, "m_x": 1, "m_y": 2, "overlap": False}, True, "an FSDP axis of one chip"),
            ({**v5p, "x": 64, "y": 1, "m_x": 2, "m_y": 1, "overlap": False}, True, "a TP axis of one chip"),
            ({**course, "x": 1, "overlap": False}, False, "edge case: an FSDP axis of one chip"),
            ({**course, "y": 1, "overlap": False}, False, "edge case: a TP axis of one chip")):
        yield {k: args[k] for k in order}, public, note


def _volume_args(cfg, rng):
    m, mesh = cfg.model, cfg.comm4d
    yield dict(tokens=8, d_model=8, d_ff=24, x=2, y=2), True, "a tiny model on a 2 x 2 mesh"
    if m.d_ff % mesh.y == 0:
        yield (dict(tokens=mesh.n * 256, d_model=m.d_model, d_ff=m.d_ff, x=mesh.x, y=mesh.y),
               False, "the course model on the course mesh")
    yield dict(tokens=12, d_model=8, d_ff=24, x=3, y=2, bytes_per_value=4), False, "FP32 values"
    yield dict(tokens=4, d_model=16, d_ff=16, x=1, y=1), False, "edge case: a 1 x 1 mesh"
    for d, f, _ in model_shapes(rng, 5):
        mesh_args, _, _ = _mesh(rng)
        x, y = mesh_args["x"], mesh_args["y"]
        yield dict(tokens=x * rng.randint(1, 4096), d_model=d, d_ff=f, x=x, y=y), False, ""


# ---- misconceptions: the wrong function each mistake amounts to --------------

NO_M_MSG = ("matches leaving out the M factor: a collective over an axis spanning M mesh axes "
            "uses M sets of bidirectional links, V / (W_ici · M) seconds")


# The TPU Scaling Book's published criteria for mixed FSDP and TP, each the book's result at its optimal FSDP
# degree X_opt, where the FSDP and TP comms are equal: named as the book's, under the book's assumption, never
# as a mistake of the student's; only the given mesh is not at X_opt (docs/spec.md, question 3)
_AT_X_OPT = ("; the book derives it at its optimal FSDP degree X = X_opt, where the FSDP and TP comms are equal, "
             "and it holds only there: this task's X and Y are given, so solve math against comms for them, "
             "overlapped or summed as `overlap` says")
SHORTCUT_MSG = ("matches the TPU Scaling Book's takeaway B/N > α²/(M_X·M_Y·F) (α = C/W_ici), times N: the "
                "criterion of the book's later edition, which lets the FSDP and TP comms each overlap the math"
                + _AT_X_OPT)
FEB_2025_MSG = ("matches the Feb-2025 edition of the TPU Scaling Book, B/N > 4α²/(M_X·M_Y·F) (α = C/W_ici), "
                "times N: that edition's criterion sums the FSDP and TP comms (the later edition overlaps them "
                "and has α² in its place); its applied-training chapter's 2·2550²/F is this criterion with "
                "M_X·M_Y = 2" + _AT_X_OPT)
APPLIED_MSG = ("matches the TPU Scaling Book's applied-training chapter, B/N > 2·α²/F (its 2·2550²/F = 453 for "
               "LLaMA-3 70B on TPU v5p; α = C/W_ici), times N: the Feb-2025 edition's 4α²/(M_X·M_Y·F) with "
               "that chapter's M_X·M_Y = 2, whatever this mesh's" + _AT_X_OPT)
ONE_CHIP_MSG = ("matches charging a collective over an axis of one chip: with X = 1 (or Y = 1) that axis "
                "moves nothing, so its communication costs nothing, as an all-gather over p = 1 device does "
                "in question 2")


def _shortcut(d, f, x, y, c, w, mx, my, overlap=True):
    # the book's per-chip takeaway for any mesh, whatever its X (and either convention), times N = X·Y
    return x * y * ref.scaling_book_takeaway_per_chip(f, c, w, mx, my)


def _feb_2025(d, f, x, y, c, w, mx, my, overlap=True):
    return 4 * _shortcut(d, f, x, y, c, w, mx, my)


def _applied(d, f, x, y, c, w, mx, my, overlap=True):
    return 2 * x * y * (c / w) ** 2 / f


def _charged(d, f, x, y, c, w, mx, my, overlap=True):
    """Every collective charged V / (W·M), an axis of one chip included: the formula for X, Y >= 2."""
    if x > 1 and y > 1:
        return ref.min_batch_compute_bound(d, f, x, y, c, w, mx, my, overlap)
    room = f * w * my - y * c
    if overlap:
        return x * c / (w * mx) if room >= 0 else None
    return x * c * f * my / (mx * room) if room > 0 else None


def _scaled(value, divisor):
    return None if value is None else value / divisor


def _flipped(d, f, x, y, c, w, mx, my, overlap=True):
    return ref.min_batch_compute_bound(d, f, x, y, c, w, mx, my, not overlap)


def _shards(tokens, d, f, x, y, bpv=2):
    """The local shards' sizes instead of the gathered / unscattered tensors."""
    axis = {"allgather_in": y, "allgather_w_in": x, "allgather_w_out": x, "reducescatter_out": y}
    return {k: v // axis[k] for k, v in ref.block_collective_bytes(tokens, d, f, x, y, bpv).items()}


PARTS = (
    function_part("3.1", M, "forward_flops", ref.forward_flops, 1, _flops_args, EXACT_INT,
                  misconceptions=(("2TDF per block", "matches one matmul per block: each block has two, "
                                   "W_in and W_out", lambda t, d, f, layers: t * d * f * layers * 2),),
                  description="forward FLOPs of the model, all devices together"),
    function_part("3.2", M, "math_seconds", ref.math_seconds, 1, _math_args, REAL,
                  misconceptions=(("compute not divided", "matches the math time of the whole batch on one "
                                   "chip: the FLOPs are split across all N = X·Y chips",
                                   lambda t, d, f, k, c: ref.math_seconds(t, d, f, 1, c)),),
                  description="math seconds of one block's forward on N chips"),
    function_part("3.3", M, "fsdp_comm_seconds", ref.fsdp_comm_seconds, 1, _fsdp_args, REAL,
                  misconceptions=(("no M factor", NO_M_MSG,
                                   lambda d, f, y, w, mx: ref.fsdp_comm_seconds(d, f, y, w, 1)),
                                  ("weights not sharded over Y", "matches gathering the full W_in and W_out: "
                                   "over X each chip gathers only its F/Y slice of both",
                                   lambda d, f, y, w, mx: ref.fsdp_comm_seconds(d, f, 1, w, mx))),
                  description="FSDP all-gather seconds of one block"),
    function_part("3.4", M, "tp_comm_seconds", ref.tp_comm_seconds, 1, _tp_args, REAL,
                  misconceptions=(("no M factor", NO_M_MSG,
                                   lambda t, d, x, w, my: ref.tp_comm_seconds(t, d, x, w, 1)),),
                  description="TP all-gather + reduce-scatter seconds of one block"),
    function_part("3.5", M, "min_batch_compute_bound", ref.min_batch_compute_bound, 3, _min_batch_args,
                  Compare("real_or_none"),
                  misconceptions=(
                      ("summed where overlapped", "matches the other convention: with overlap=True (the "
                       "default) comms run while the chips compute and the binding term is max(FSDP, TP); "
                       "overlap=False sums them", _flipped),
                      ("per-chip batch", "matches B/N, the batch per chip (the same number comes out when "
                       "the math is not divided across the N chips): return the global batch B in tokens",
                       lambda d, f, x, y, *rest: _scaled(ref.min_batch_compute_bound(d, f, x, y, *rest), x * y)),
                      ("per-shard batch", "matches B/X, the batch per data shard: return the global batch "
                       "B = X · (B/X) in tokens",
                       lambda d, f, x, y, *rest: _scaled(ref.min_batch_compute_bound(d, f, x, y, *rest), x)),
                      ("compute not divided", "matches math time not divided across the N = X·Y chips",
                       lambda d, f, x, y, c, *rest: ref.min_batch_compute_bound(d, f, x, y, c / (x * y), *rest)),
                      ("no M factor", NO_M_MSG,
                       lambda d, f, x, y, c, w, mx, my, *rest:
                           ref.min_batch_compute_bound(d, f, x, y, c, w, 1, 1, *rest)),
                      ("Scaling Book shortcut", SHORTCUT_MSG, _shortcut),
                      ("Scaling Book shortcut, Feb-2025 edition", FEB_2025_MSG, _feb_2025),
                      ("Scaling Book shortcut, applied chapter", APPLIED_MSG, _applied),
                      ("one-chip axis charged", ONE_CHIP_MSG, _charged),
                  ), description="smallest global batch (tokens) at which one block is compute bound"),
    function_part("3.6", M, "block_collective_bytes", ref.block_collective_bytes, 2, _volume_args,
                  Compare("int_dict"),
                  misconceptions=(("local shard sizes", "matches the local shards' sizes: V is the gathered "
                                   "tensor for an all-gather and the tensor before scattering for a "
                                   "reduce-scatter", _shards),),
                  description="bytes of each collective of one block's forward, per chip"),
)

# ---- 3.8: block_collective_bytes against a traced 2 x 2 gloo mesh ---------------

MESH_SHAPES = ((8, 8, 16), (6, 12, 12), (4, 4, 8))     # (tokens, d_model, d_ff) on X = Y = 2


def _mesh_cases(cfg, rng):
    return [Case((Call(M, "comm4d_mesh_forward", dict(world_size=4, tokens=t, d_model=d, d_ff=f,
                                                      x=2, y=2, seed=cfg.course.seed % 1000 + k)),),
                 public=k == 0, note="a real BF16 forward on a 2 x 2 gloo mesh")
            for k, (t, d, f) in enumerate(MESH_SHAPES)]


def _mesh_expect(case: Case) -> list:
    a = case.calls[0].args
    return [ref.block_collective_bytes(a["tokens"], a["d_model"], a["d_ff"], a["x"], a["y"])]


REAL_RUN = Part(
    id="3.8", title="real-run check on a 2 x 2 mesh", module=M, points=3, probe="gloo",
    cases=_mesh_cases, expect=_mesh_expect, compare=MESH_VOLUMES,
    description=("one block's BF16 forward with the layout In[B_X, D_Y] · W_in[D_X, F_Y] · "
                 "W_out[F_Y, D_X] on a 2 x 2 gloo mesh, every collective traced per mesh axis: "
                 "block_collective_bytes must equal the measured volumes"))

WRITTEN_A = written_part("3.a", M, "(a) written: time of one block",
                         "in writeup.md, graded by hand: your derivation of the math time and of each kind of "
                         "communication as functions of B, and which of them grow with the batch")
WRITTEN_B = written_part("3.b", M, "(b) written: when is the mesh compute bound?",
                         "in writeup.md, graded by hand: your calculation and a one-sentence answer to (b)")
WRITTEN_C = written_part("3.c", M, "(c) written: the collectives",
                         "in writeup.md, graded by hand: your derivation of the bytes each chip gathers or "
                         "scatters in one block's forward, and their values for (c)")
FREE_RESPONSE = written_part("3.7", M, "(d) a smaller batch, still compute bound",
                             "in writeup.md, graded by hand: a paragraph backed by references or equations",
                             points=4)



def _degenerate(cfg) -> str | None:
    """(b) has no batch when the TP comms never hide (F·W_ici·M_Y < Y·C overlapped, <= summed), and then
    (c) and (d), which start from it, have none either; (c) has no volumes when F does not split over Y."""
    m, mesh, c, w = _course(cfg)
    f, y = m.d_ff, mesh.y
    if ref.min_batch_compute_bound(m.d_model, f, mesh.x, y, c, w, mesh.m_x, mesh.m_y, mesh.overlap) is None:
        how = "overlapped" if mesh.overlap else "summed"
        return (f"3 (b)-(d): no batch makes this mesh compute bound (comms {how}): the TP comms grow with B as "
                f"fast as the math and are never hidden, F·W_ici·M_Y = {sci(f * w * mesh.m_y)} "
                f"{'<' if mesh.overlap else '≤'} Y·C = {sci(y * c)}, so (c) has no batch to count the "
                "collectives at and (d) no batch to lower")
    alone = _one_chip_axis_sentence(mesh)
    if alone:
        return alone
    if f % y:
        return (f"3 (c): F = {n(f)} does not split evenly over Y = {y} tensor-parallel chips, so the weight "
                "shards W_in[D_X, F_Y] and W_out[F_Y, D_X] are not whole and the collectives have no "
                "volume per chip")
    return None


def _one_chip_axis_sentence(mesh) -> str | None:
    """A mesh axis of one chip (X = 1 or Y = 1): its collectives move nothing and cost nothing, as p = 1 in
    question 2 (docs/spec.md, question 3); a course may set one, and build names it."""
    if mesh.x > 1 and mesh.y > 1:
        return None
    axes = " and ".join(name for name, size in (("X = 1 (no FSDP)", mesh.x), ("Y = 1 (no tensor parallelism)",
                                                                             mesh.y)) if size == 1)
    what = ("so every batch is compute bound (B = 0): (b) has no threshold, (c) no batch to count the "
            "collectives at and (d) none to lower" if mesh.x == 1 else
            "so both conventions give the same batch, and the Scaling Book's X_opt and takeaway, which mix FSDP "
            "with TP, do not apply")
    return (f"3: an axis of one chip, {axes}: its collectives move nothing and cost nothing, as an all-gather "
            f"over p = 1 device in question 2, {what}")


QUESTION = Question(number=3, module=M, title="4D communication accounting", template="comm4d.md.j2",
                    parts=PARTS + (WRITTEN_A, WRITTEN_B, WRITTEN_C, FREE_RESPONSE, REAL_RUN), worked=ref.worked,
                    figures=FIGURES, degenerate=_degenerate)
