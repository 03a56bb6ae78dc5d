"""Error cases of this topic: B(...) is run against PyTorch too, E(...) names something PyTorch has not
(error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401

CASES = []
EXEMPT = {}
