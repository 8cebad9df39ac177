"""Question 3: the traced 2 x 2 mesh (scenario "comm4d_mesh_forward")."""
from __future__ import annotations

from dataclasses import dataclass

from ..comparison import Compare


@dataclass(frozen=True)
class MeshVolumes:
    """Every rank's traced volumes equal the student's block_collective_bytes.
    (`expected`, the reference's formula, guards the reference run itself.)"""

    def problem(self, expected, got) -> str | None:
        if not isinstance(got, list) or not got:
            return "returned no per-rank results"
        for r, run in enumerate(got):
            if not (run["output_ok"] and run["axes_ok"] and run["measured"] == expected):
                return f"rank {r}: the reference mesh run is inconsistent (a grader bug): {run}"
            why = Compare("int_dict").problem(run["measured"], run["student"])
            if why:     # no values: hidden cases must not reveal the volumes
                return f"rank {r}: block_collective_bytes against the traced collectives: {why}"
        return None

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


MESH_VOLUMES = MeshVolumes()
