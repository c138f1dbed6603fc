"""spmdcheck rules for `spmd_types.runtime` (re-exports of the package API)."""

from . import assert_local_type as assert_local_type
from . import assert_local_type_like as assert_local_type_like
from . import assert_type as assert_type
from . import assert_type_like as assert_type_like
from . import local as local
from . import local_map as local_map
from . import mutate_type as mutate_type
from . import no_typecheck as no_typecheck
from . import register_autograd_function as register_autograd_function
from . import register_decomposition as register_decomposition
from . import register_no_typecheck as register_no_typecheck
from . import reinterpret_no_grad as reinterpret_no_grad
