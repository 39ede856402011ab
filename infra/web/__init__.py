"""The web operator page: the on-call list and a schedule's timeline as server-rendered HTML
(``pages.py``: routes, login, templates in ``templates/``, ``static/page.css``), built from the
application service's reads (``timeline.py``). The HTTP app includes ``pages.make_router``."""
