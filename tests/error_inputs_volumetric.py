"""Error cases of the 3-D layers and grid_sample: B(...) is run against PyTorch too, E(...) names something PyTorch has not
(error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason
(test_error_coverage.py)."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401

CASES = []
NOT_YET = "a PyTorch name gpumemnet has not yet: every call raises NotImplementedError saying so"
EXEMPT = {"nn.Conv3d": NOT_YET, "F.affine_grid": NOT_YET, "F.grid_sample": NOT_YET}
