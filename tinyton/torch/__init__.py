"""tinyton as a torch.compile backend: `torch.compile(model, backend="tinyton")` (registered through the
`torch_dynamo_backends` entry point) or `backend=tinyton.torch.backend`; `tinyton.torch.explain(model,
*inputs)` says what ran in tinyton and what in torch. Importing this package imports torch; `import tinyton`
does not.
"""

from tinyton.torch.backend import backend
from tinyton.torch.explain import Explanation, explain

__all__ = ["Explanation", "backend", "explain"]
