"""Makes tinyton's dialects and passes visible to plain `xdsl-opt` through xDSL's entry point."""

from xdsl.universe import Universe

from tinyton.dialects import tinyton_dialects
from tinyton.passes import ALL_PASSES

TINYTON_UNIVERSE = Universe(all_dialects=tinyton_dialects(), all_passes=ALL_PASSES)
