"""Views named by their dotted path and imported on their first request.

The analysis pages need pandas, scipy and numba (seconds to import and some 150 MB per process);
the annotator's pages need none of them. A URL configuration that imports every view makes each
web process pay for all of them on its first request, whatever it serves. `lazy_view` keeps a
URL pattern cheap: the view's module is imported when a request first reaches it (or when
something asks for one of its attributes, as DRF's schema generator and Django's CSRF middleware
do), once per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.utils.module_loading import import_string


class LazyView:
    """A view function standing for ``<module>.<Class>.as_view(**initkwargs)``."""

    def __init__(self, dotted: str, initkwargs: dict[str, Any]) -> None:
        self.dotted = dotted
        self.initkwargs = dict(initkwargs)
        self._view: Callable[..., HttpResponseBase] | None = None
        self._lock = threading.Lock()
        # The names Django's URL resolver reads to describe a view (URLPattern.lookup_str),
        # given without importing it: they match the class's own.
        module, _, name = dotted.rpartition(".")
        self.__module__ = module
        self.__name__ = self.__qualname__ = name

    def resolve(self) -> Callable[..., HttpResponseBase]:
        """The real view function, importing its module the first time."""
        if self._view is None:
            with self._lock:
                if self._view is None:
                    self._view = import_string(self.dotted).as_view(**self.initkwargs)
        return self._view

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return self.resolve()(request, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only attributes this object lacks (csrf_exempt, cls, ...) reach here. The resolver asks
        # whether a view has `view_class` while it builds its reverse table, for every pattern:
        # until the view is imported for a request, it has none (lookup_str then reads the
        # names set above).
        if name.startswith("__") or name in {"dotted", "initkwargs", "_view", "_lock"}:
            raise AttributeError(name)
        if self._view is None and name in {"view_class", "view_initkwargs"}:
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"<lazy view {self.dotted}>"


def lazy_view(dotted: str, **initkwargs: Any) -> LazyView:
    """A URL pattern's view given as ``"app.module.ViewClass"``, imported on first use."""
    return LazyView(dotted, initkwargs)
