"""The error tables of the topic files error_inputs_<topic>.py, gathered for error_inputs.py and
test_error_coverage.py."""
import error_inputs_compat
import error_inputs_complex
import error_inputs_decomp
import error_inputs_distributions
import error_inputs_misc
import error_inputs_names3
import error_inputs_names5
import error_inputs_names6
import error_inputs_nnextra
import error_inputs_products
import error_inputs_rnn
import error_inputs_special
import error_inputs_specialns
import error_inputs_testing
import error_inputs_transformer
import error_inputs_utils
import error_inputs_volumetric

_TOPICS = (error_inputs_special, error_inputs_products, error_inputs_misc, error_inputs_nnextra,
           error_inputs_volumetric, error_inputs_utils, error_inputs_decomp, error_inputs_specialns,
           error_inputs_distributions, error_inputs_testing,
           error_inputs_transformer, error_inputs_compat, error_inputs_rnn, error_inputs_complex, error_inputs_names3,
           error_inputs_names5, error_inputs_names6)
CASES = [c for m in _TOPICS for c in m.CASES]
EXEMPT = {k: v for m in _TOPICS for k, v in m.EXEMPT.items()}
