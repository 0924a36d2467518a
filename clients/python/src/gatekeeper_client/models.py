"""The request and answer models, generated from openapi.yaml (see ``_generated``)."""

from ._generated.models import *  # noqa: F403
from ._generated.models import __all__ as __all__  # noqa: F401
