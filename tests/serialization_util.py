"""Helpers of the gm.save / gm.load tests (tests/test_serialization*.py): a file saved before a failing save, and
what else is in its directory afterwards (a failed save must leave the old file and no temporary file)."""
import gpumemnet as gm
from gpumemnet.serialization import save


def old_file(directory):
    """A checkpoint saved in directory: (its path, its bytes)."""
    path = directory / "ckpt.safetensors"
    save({"w": gm.ones(3)}, path)
    return path, path.read_bytes()


def leftovers(directory):
    """The names in directory other than old_file's."""
    return sorted(p.name for p in directory.iterdir() if p.name != "ckpt.safetensors")
