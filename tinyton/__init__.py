"""tinyton: a hackable GPU kernel compiler and fusion optimizer on xDSL. `import tinyton as tt`."""

from tinyton.language import *  # noqa: F403
from tinyton.language import __all__
